"""The toolkit at AWM-1K scale: every stage on 10, 100 and 1,000 generated worlds.

    python bench/scale.py --worlds 10 100 --out outputs/scale            # resumable
    python bench/scale.py --worlds 100 --ray --out outputs/scale         # + the Ray collection
    python bench/scale.py --out outputs/scale --table                    # the table so far

For each number of worlds N: ``collect.worlds.generate n=N seed=0``, ``collect.awm.check``,
``collect`` (the grid: 7 trigger probabilities x ``--seeds`` seeds per task, the simulated
agent, ``state_key=db``, ``--workers`` local worker processes; with ``--ray`` a second
collection through ``executor.kind=ray`` with as many Ray CPUs), ``helpdp.search``,
``helpdp.frontier``, ``helpdp.select`` and ``helpdp.label`` at budget 1, each a command
of its own. Per stage: wall seconds; CPU seconds of the whole process tree (user + system,
sampled every 0.2 s from /proc by psutil and summed per process at its last sample:
processes living under 0.2 s are missed); peak memory (the largest sum of the tree's
proportional set sizes over the samples: a page shared by k processes counts 1/k in each,
so the zygote's forks are not counted k times) and the root process's own peak; the bytes the stage wrote. The load average
is recorded beside each row: CPU seconds are comparable across loads, wall seconds are not.

Rows are appended to ``<out>/scale.jsonl`` as stages finish; a rerun skips the (N, stage)
rows it has, and a stage's own resumable output (the collection's shards) is reused. The
table prints, per stage, the cost at each N and the growth exponent between the two
largest sizes (log cost / log N: 1 is linear in the worlds), and the extrapolation to the
full AWM-1K grid (1,000 worlds x 10 tasks x 7 probabilities x 3 seeds) from the largest N
measured, on one machine and on N Ray nodes of this machine's cores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
PROBABILITIES = 7


def _pss(p: psutil.Process) -> int:
    """Proportional set size in bytes (shared pages split among the processes sharing
    them: the zygote's forks share most of theirs), from ``smaps_rollup``; else RSS."""
    try:
        with open(f"/proc/{p.pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return p.memory_info().rss


def _tree_sampler(proc: psutil.Popen, stop: threading.Event, out: dict) -> None:
    """Sample ``proc``'s process tree every 0.2 s: CPU seconds per pid (the last sample),
    the peak sum of proportional set sizes and the root's own peak."""
    cpu: dict[tuple[int, float], float] = {}
    peak_tree = peak_root = 0
    while True:
        try:
            procs = [proc] + proc.children(recursive=True)
        except psutil.NoSuchProcess:
            procs = []
        rss = 0
        for p in procs:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    m = _pss(p)
                    cpu[(p.pid, p.create_time())] = t.user + t.system
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            rss += m
            if p.pid == proc.pid:
                peak_root = max(peak_root, m)
        peak_tree = max(peak_tree, rss)
        if stop.wait(0.2):
            break
    out.update(
        cpu_s=sum(cpu.values()), peak_tree_mb=peak_tree / 2**20, peak_root_mb=peak_root / 2**20
    )


def du_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (0 when absent)."""
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


class Interrupted(Exception):
    """The bench was stopped (Ctrl-C or SIGTERM) while a stage ran: ``row`` holds what was
    measured up to the stop."""

    def __init__(self, row: dict):
        super().__init__("stopped")
        self.row = row


def run_stage(argv: list[str], wrote: Path, log: Path) -> dict:
    """Run one stage's command; its measurements (module docstring). Raises SystemExit on
    failure and :class:`Interrupted` (with the measurements so far) when stopped: the
    stage is sent SIGTERM, which the collection takes as Ctrl-C (it keeps its finished
    shards); SIGINT would not do: a command started with nohup or & ignores it."""
    before = du_bytes(wrote)
    stop, res = threading.Event(), {}
    t0 = time.perf_counter()
    stopped = False
    with log.open("a") as fh:
        fh.write("$ " + " ".join(argv) + "\n")
        fh.flush()
        proc = psutil.Popen(argv, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)
        th = threading.Thread(target=_tree_sampler, args=(proc, stop, res), daemon=True)
        th.start()
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            stopped = True
            proc.send_signal(signal.SIGTERM)  # SIGINT may be ignored (nohup, &)
            rc = proc.wait()
        wall = time.perf_counter() - t0
        stop.set()
        th.join()
    row = {
        "wall_s": wall,
        **res,
        "disk_mb": (du_bytes(wrote) - before) / 2**20,
        "load1": os.getloadavg()[0],
    }
    if stopped:
        raise Interrupted(row)
    if rc != 0:
        raise SystemExit(f"{' '.join(argv[2:4])}: exit {rc}; its output is in {log}")
    return row


def stages(n: int, out: Path, seeds: int, workers: int, ray: bool) -> list[tuple[str, list, Path]]:
    """(name, argv, what it writes) for N worlds, in order."""
    w, d = out / f"worlds-{n}", out / f"data-{n}"
    m = [PY, "-m"]
    grid = [
        "state_key=db",
        f"schedule.seeds=0:{seeds}",
        f"executor.workers={workers}",
        "progress=false",
        "executor.shard_size=20",
    ]
    rows = [
        ("generate", m + ["collect.worlds.generate", f"out={w}", f"n={n}", "seed=0"], w),
        ("check", m + ["collect.awm.check", f"data={w}"], out / f"check-{n}"),
        ("collect", m + ["collect", f"out={d}", f"worlds={w}"] + grid, d),
    ]
    if ray:
        ray_args = [a for a in grid if not a.startswith("executor.workers")]
        ray_args += ["executor.kind=ray"]
        rows.append(("collect_ray", m + ["collect", f"out={out}/data-ray-{n}", f"worlds={w}"] + ray_args, out / f"data-ray-{n}"))  # fmt: skip
    for name, mod, extra in (
        ("search", "helpdp.search", ["budget=[1]"]),
        ("frontier", "helpdp.frontier", ["budget=1.0"]),
        ("select", "helpdp.select", ["budget=[1]"]),
        ("label", "helpdp.label", ["budget=[1]"]),
    ):
        o = out / f"{name}-{n}"
        rows.append((name, m + [mod, f"data={d}", f"out={o}"] + extra, o))
    return rows


def _append(jsonl: Path, rows: list[dict], row: dict) -> None:
    with jsonl.open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    rows.append(row)


def combined(rows: list[dict]) -> list[dict]:
    """One row per (worlds, stage): a collection stopped and resumed is the sum of its
    parts (wall, CPU, disk; the largest peak), ``parts`` of them."""
    out: dict[tuple, dict] = {}
    for r in rows:
        k = (r["worlds"], r["stage"])
        if k not in out:
            out[k] = {**r, "parts": 1}
            continue
        c = out[k]
        for f in ("wall_s", "cpu_s", "disk_mb"):
            c[f] += r[f]
        for f in ("peak_tree_mb", "peak_root_mb"):
            c[f] = max(c[f], r[f])
        c["load1"] = max(c["load1"], r["load1"])
        c["parts"] += 1
        c["partial"] = r.get("partial", False)
    return [r for r in out.values() if not r.get("partial")]


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def growth(rows: list[dict], stage: str, key: str) -> tuple[float, float, float] | None:
    """(exponent, N, cost at N) between the two largest N measured for ``stage``."""
    pts = sorted((r["worlds"], r[key]) for r in rows if r["stage"] == stage and r[key] > 0)
    if len(pts) < 2:
        return None
    (n0, c0), (n1, c1) = pts[-2], pts[-1]
    return math.log(c1 / c0) / math.log(n1 / n0), n1, c1


def table(rows: list[dict], seeds: int) -> str:
    """The markdown table of ``rows`` and the extrapolation (module docstring)."""
    rows = combined(rows)
    sizes = sorted({r["worlds"] for r in rows})
    order = ["generate", "check", "collect", "collect_ray", "search", "frontier", "select", "label"]
    lines = [
        "| stage | " + " | ".join(f"{n} worlds: wall s / CPU s / peak MB / disk MB" for n in sizes) + " | growth (CPU) |",
        "|---|" + "---|" * (len(sizes) + 1),
    ]  # fmt: skip
    for st in order:
        by_n = {r["worlds"]: r for r in rows if r["stage"] == st}
        if not by_n:
            continue
        cells = []
        for n in sizes:
            r = by_n.get(n)
            cells.append(
                "-"
                if r is None
                else f"{r['wall_s']:.1f} / {r['cpu_s']:.1f} / {r['peak_tree_mb']:.0f} / {r['disk_mb']:.1f}"
            )
        g = growth(rows, st, "cpu_s")
        lines.append(
            f"| {st} | " + " | ".join(cells) + f" | {'-' if g is None else f'N^{g[0]:.2f}'} |"
        )
    loads = [r["load1"] for r in rows]
    if loads:
        lines.append(f"\nload average (1 min) during the stages: {min(loads):.1f}-{max(loads):.1f}")
    full = 1000 * 10 * PROBABILITIES * 3  # episodes of the full AWM-1K grid
    for st in ("collect", "collect_ray"):
        big = max((r for r in rows if r["stage"] == st), key=lambda r: r["worlds"], default=None)
        if big is None:
            continue
        eps = big["worlds"] * 10 * PROBABILITIES * seeds
        cpu_per_ep = big["cpu_s"] / eps
        wall_per_ep = big["wall_s"] / eps
        lines.append(
            f"{st}: {eps} episodes at {big['worlds']} worlds, {1000 * cpu_per_ep:.0f} ms CPU and "
            f"{1000 * wall_per_ep:.0f} ms wall per episode; the full AWM-1K grid ({full} episodes): "
            f"{full * cpu_per_ep / 3600:.1f} CPU hours, {full * wall_per_ep / 3600:.1f} h wall here, "
            f"about {full * wall_per_ep / 3600 / 8:.1f} h on 8 such nodes if it scales linearly"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--worlds", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--seeds", type=int, default=1, help="grid seeds per task and probability")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ray", action="store_true", help="also collect through executor.kind=ray")
    ap.add_argument("--out", default="outputs/scale")
    ap.add_argument("--table", action="store_true", help="only print the table of --out")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "scale.jsonl"
    rows = read_rows(jsonl)
    if not args.table:
        done = {(r["worlds"], r["stage"]) for r in rows if not r.get("partial")}
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # kill PID: as Ctrl-C
        for n in args.worlds:
            for name, argv, wrote in stages(n, out, args.seeds, args.workers, args.ray):
                if (n, name) in done:
                    continue
                if wrote.exists() and not name.startswith("collect"):
                    raise SystemExit(
                        f"{wrote} exists without a measurement: remove it to rerun {name}"
                    )
                print(f"{n} worlds: {name} ...", flush=True)
                row = {"worlds": n, "stage": name, "seeds": args.seeds, "workers": args.workers}
                try:
                    row.update(run_stage(argv, wrote, out / f"log-{n}.txt"))
                except Interrupted as e:  # a collection resumes: its part so far is kept
                    if name.startswith("collect"):
                        _append(jsonl, rows, {**row, **e.row, "partial": True})
                    raise SystemExit(f"stopped in {n} worlds: {name}; rerun to resume") from None
                _append(jsonl, rows, row)
                print(
                    "  "
                    + json.dumps(
                        {k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}
                    ),
                    flush=True,
                )
    print(table(rows, args.seeds))


if __name__ == "__main__":
    main()
