"""Episodes per hour of the real CPU actor under each runtime, on one schedule, in one run.

    make real-actor llama-server              # the weights; llama-cpp-python in .venv-llama
    python bench/runtimes.py --out /tmp/runtimes --json /tmp/runtimes.json
    python bench/runtimes.py --runtimes hf-1w llama-2x1 --seeds 0 --max-turns 6   # smaller
    python bench/runtimes.py --compare hf=A,GRID llama=B --max-turns 6   # the same model?
    python bench/runtimes.py --turn0 hf=GRID llama=STAGE2       # turn 0 with help, by class
    python bench/runtimes.py --size STAGE2_DIR --effect 0.1      # episodes stage 2 needs

Each runtime runs the same collection (``python -m collect``: the demo worlds' train tasks
``--scenarios`` x ``--tasks``, trigger probabilities ``--probabilities``, seeds ``--seeds``,
the oracle, lenient turns, one episode per shard) one after the other:

- ``hf-1w``: transformers in process (``collect/actor=qwen_coder_0_5b``), 1 worker, 2 threads;
- ``hf-2w``: the same, 2 workers (each loads the model), 1 thread each;
- ``llama-1x2``: ``collect.realserve`` with 1 slot of 2 threads, the collector with 1 worker;
- ``llama-2x1``: 2 slots of 1 thread each, the collector with 2 workers
  (``collect/actor=qwen_coder_0_5b_llamacpp``).

Per runtime it prints the wall time, the episodes per hour all-in (model load or server
start included) and after the start (from each worker's first finished episode to the
last: what a long collection gets), the ratios of both to the first runtime, the CPU
seconds the runtime's processes used (collector, its workers, the environments and the
servers), the 1-minute load average sampled during its run, and what its episodes were
(turns, success rate, format errors, how they ended, new tokens per turn): the runtimes
sample differently, so the episodes differ, but they should be of the same kind.
Timings depend on the machine and on whatever else runs on it: compare runtimes within
one run only. On a machine shared with other jobs the scheduler gives each runnable
process about an equal share, so a runtime of two busy processes gets about twice the
CPU of a runtime of one: the wall-time rates then favour two workers (or two slots)
beyond what an idle machine would show, and the CPU seconds per episode (the work the
runtime does, nearly independent of the load) are the fairer comparison of the runtimes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Runtime:
    """One way to run the real actor: the collector's preset and workers, and the server."""

    name: str
    preset: str
    workers: int
    threads: int  # torch threads per worker, or llama.cpp threads per slot
    slots: int = 0  # llama.cpp server slots (0: the model runs in the collector's workers)
    note: str = ""


RUNTIMES = {
    r.name: r
    for r in (
        Runtime("hf-1w", "qwen_coder_0_5b", 1, 2, note="transformers in process, 1 worker"),
        Runtime("hf-2w", "qwen_coder_0_5b", 2, 1, note="transformers in process, 2 workers"),
        Runtime("llama-1x2", "qwen_coder_0_5b_llamacpp", 1, 2, 1, "llama.cpp, 1 slot x 2 threads"),
        Runtime("llama-2x1", "qwen_coder_0_5b_llamacpp", 2, 1, 2, "llama.cpp, 2 slots x 1 thread"),
    )
}


@dataclass(frozen=True)
class Schedule:
    """The collection every runtime runs."""

    scenarios: tuple[str, ...] = ("e_commerce_admin_1", "smart_home_1")
    tasks: tuple[int, ...] = (0,)
    probabilities: tuple[float, ...] = (0.0, 0.5, 1.0)
    seeds: tuple[int, ...] = (0, 1)
    max_turns: int = 0  # env.max_turns (0: the environment's default, 30)

    def overrides(self) -> list[str]:
        def lst(xs):
            return "[" + ",".join(map(str, xs)) + "]"

        return [
            f"schedule.scenarios={lst(self.scenarios)}",
            f"schedule.tasks={lst(self.tasks)}",
            f"schedule.probabilities={lst(self.probabilities)}",
            f"schedule.seeds={lst(self.seeds)}",
            "schedule.splits=[train]",
        ] + ([f"env.max_turns={self.max_turns}"] if self.max_turns else [])


def collect_command(
    rt: Runtime,
    schedule: Schedule,
    out: str | Path,
    base_url: str | None = None,
    python: str = sys.executable,
) -> list[str]:
    """The ``python -m collect`` command line of ``rt`` on ``schedule``."""
    cmd = [
        python,
        "-m",
        "collect",
        f"out={out}",
        f"collect/actor={rt.preset}",
        "actor.call_format=lenient",
        f"executor.workers={rt.workers}",
        "executor.shard_size=1",
        "executor.batch_size=1",
        "keep_shards=true",
        "overwrite=true",
        "progress=false",
        *schedule.overrides(),
    ]
    if rt.slots:
        if not base_url:
            raise ValueError(f"{rt.name}: a llama.cpp runtime needs the server's base_url")
        cmd.append(f"actor.base_url={base_url}")
    else:
        cmd.append(f"actor.threads={rt.threads}")
    return cmd


def steady_rate(finished: list[float], workers: int) -> float | None:
    """Episodes per hour after the start: from the ``workers``-th finished episode (each
    worker has loaded its model and finished one) to the last; None with too few."""
    t = sorted(finished)
    if len(t) <= workers or t[-1] <= t[workers - 1]:
        return None
    return (len(t) - workers) / (t[-1] - t[workers - 1]) * 3600.0


@dataclass
class Result:
    """What one runtime measured."""

    name: str
    note: str
    episodes: int
    wall_s: float
    eph_all: float
    eph_steady: float | None
    cpu_s: float
    load: float
    quality: dict = field(default_factory=dict)


def _ratio(x: float | None, base: float | None) -> str:
    return f"{x / base:.2f}x" if x and base else "—"


def _per_ep(r: Result) -> float:
    return r.cpu_s / max(1, r.episodes)


def format_table(results: list[Result]) -> str:
    """The markdown table of ``results``; the ratios are against the first row (for CPU
    seconds: the first row's per episode over this row's, so higher is faster)."""
    base = results[0] if results else None
    lines = [
        "| runtime | episodes | wall s | episodes / h, all-in | ratio | episodes / h, after start "
        "| ratio | CPU s / episode | ratio (per CPU s) | load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        steady = f"{r.eph_steady:.1f}" if r.eph_steady else "—"
        lines.append(
            f"| {r.note} | {r.episodes} | {r.wall_s:.0f} | {r.eph_all:.1f} | "
            f"{_ratio(r.eph_all, base.eph_all)} | {steady} | {_ratio(r.eph_steady, base.eph_steady)} "
            f"| {_per_ep(r):.0f} | {_ratio(_per_ep(base), _per_ep(r))} | {r.load:.1f} |"
        )
    lines += [
        "",
        "| runtime | turns / episode | SR | format errors / episode | ended by | new tokens / turn |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        q = r.quality
        ends = ", ".join(f"{k} {v}" for k, v in sorted(q.get("end_reason", {}).items()))
        lines.append(
            f"| {r.note} | {q.get('turns', 0):.2f} | {q.get('success', 0):.3f} "
            f"| {q.get('format_errors', 0):.2f} | {ends} | {q.get('new_tokens', 0):.0f} |"
        )
    return "\n".join(lines)


def quality(out: Path) -> dict:
    """What the episodes of the collection in ``out`` were."""
    import helpdp

    ds = helpdp.load_dataset(out)
    e, st = ds.episodes, ds.steps
    return {
        "turns": float(e["steps"].mean()),
        "success": float(e["success"].mean()),
        "format_errors": float(e["format_errors"].mean()),
        "end_reason": {str(k): int(v) for k, v in e["end_reason"].value_counts().items()},
        "new_tokens": float(st["completion_tokens"].mean()),
        "prompt_tokens": float(st["prompt_tokens"].mean()),
    }


def shard_times(out: Path) -> list[float]:
    """When each episode's shard was finished (its directory's last change)."""
    return [p.stat().st_mtime for p in (out / "shards").glob("[0-9]" * 6) if p.is_dir()]


class LoadSampler:
    """The 1-minute load average every ``period`` seconds, in a thread."""

    def __init__(self, period: float = 10.0):
        self.period, self.samples = period, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(self.period):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_one(rt: Runtime, schedule: Schedule, out: Path, port: int, llama_python: str) -> Result:
    """Run ``rt``'s collection into ``out/rt.name`` (its servers' logs beside it)."""
    import contextlib

    from collect.realserve import RealServeConfig, serve

    ds = out / rt.name
    cpu0, t0 = _children_cpu(), time.time()
    with LoadSampler() as load:
        server = contextlib.nullcontext(None)
        if rt.slots:
            server = serve(
                RealServeConfig(
                    slots=rt.slots,
                    threads=rt.threads,
                    port=port,
                    python=llama_python,
                    log_dir=str(out / f"{rt.name}-server"),
                )
            )
        with server as url:
            cmd = collect_command(rt, schedule, ds, url)
            print(f"[{rt.name}] {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
            proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
        wall = time.time() - t0
    if proc.returncode != 0:
        raise SystemExit(f"[{rt.name}] the collection exited with {proc.returncode}")
    finished = [t - t0 for t in shard_times(ds)]
    n = len(finished)
    return Result(
        rt.name,
        rt.note,
        n,
        wall,
        n / wall * 3600.0,
        steady_rate(finished, rt.workers),
        _children_cpu() - cpu0,
        statistics.mean(load.samples),
        quality(ds),
    )


def episodes_capped(dirs: list[str], max_turns: int):
    """The episodes of the datasets ``dirs`` as if cut at ``max_turns`` (0: not cut):
    ``success`` within the cap, ``turns`` = min(steps, cap), the turn-0 prompt tokens and
    each episode's trajectory (tool, failure class, format error per turn, up to the cap)."""
    import pandas as pd

    import helpdp

    rows = []
    for d in dirs:
        ds = helpdp.load_dataset(d)
        st = ds.steps.sort_values(["episode_id", "t"])
        if max_turns:
            st = st[st["t"] < max_turns]
        traj = st.groupby("episode_id").apply(
            lambda g: tuple(zip(g["kind"], g["tool_name"], g["failure"], g["format_error"])),
            include_groups=False,
        )
        p0 = st[st["t"] == 0].set_index("episode_id")["prompt_tokens"]
        e = ds.episodes.set_index("episode_id")
        cut = max_turns if max_turns else int(e["steps"].max()) + 1
        rows.append(
            pd.DataFrame(
                {
                    "task_id": e["task_id"],
                    "p": e["trigger_p"],
                    "success": (e["success"] & (e["steps"] <= cut)).astype(float),
                    "turns": e["steps"].clip(upper=cut).astype(float),
                    "prompt0": p0.reindex(e.index),
                    "traj": traj.reindex(e.index),
                }
            )
        )
    return pd.concat(rows)


def compare_runtimes(groups: dict[str, list[str]], max_turns: int = 0) -> str:
    """Do runtimes sample the same model? Per cell (task, p) each group's episodes, SR and
    turns; then each group against the first on the episodes both ran (the same episode
    ids: the same tasks, trigger draws and per-turn seeds): the paired differences in
    success and turns (mean, 95% normal interval), the share of identical trajectories
    and of identical turn-0 prompt token counts (the same chat template and tokenizer)."""
    import numpy as np

    eps = {k: episodes_capped(v, max_turns) for k, v in groups.items()}
    names = list(eps)
    cells = sorted(set().union(*(set(zip(e["task_id"], e["p"])) for e in eps.values())))
    head = " | ".join(f"{k}: n, SR, turns" for k in names)
    lines = [f"| task | p | {head} |", "|---|---|" + "---|" * len(names)]
    for task, p in cells:
        parts = []
        for k in names:
            c = eps[k][(eps[k]["task_id"] == task) & (eps[k]["p"] == p)]
            parts.append(
                f"{len(c)}, {c['success'].mean():.2f}, {c['turns'].mean():.2f}" if len(c) else "—"
            )
        lines.append(f"| {task} | {p:g} | " + " | ".join(parts) + " |")
    ref = names[0]
    lines += [
        "",
        f"| vs {ref} (paired by episode) | pairs | dSR [95%] | dturns [95%] "
        "| same trajectory | same turn-0 prompt tokens |",
        "|---|---|---|---|---|---|",
    ]
    for k in names[1:]:
        j = eps[ref].merge(eps[k], left_index=True, right_index=True, suffixes=("_a", "_b"))
        out = []
        for col in ("success", "turns"):
            d = (j[f"{col}_b"] - j[f"{col}_a"]).to_numpy()
            h = 1.96 * d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
            out.append(f"{d.mean():+.3f} [{d.mean() - h:+.3f}, {d.mean() + h:+.3f}]")
        same = float((j["traj_a"] == j["traj_b"]).mean()) if len(j) else float("nan")
        p0 = float((j["prompt0_a"] == j["prompt0_b"]).mean()) if len(j) else float("nan")
        lines.append(f"| {k} | {len(j)} | {out[0]} | {out[1]} | {same:.2f} | {p0:.2f} |")
    return "\n".join(lines)


def turn0_class(st):
    """What each turn was, coarsely: working (a call or list_tools that did not fail),
    final (an answer), unknown_tool, other (a failed call or a format error)."""
    import numpy as np

    ok = st["failure"].isna().to_numpy() & ~st["format_error"].astype(bool).to_numpy()
    final = st["kind"].eq("final").to_numpy()
    unknown = st["failure"].eq("unknown_tool").to_numpy()
    return np.select([final & ok, ok, unknown], ["final", "working", "unknown_tool"], "other")


def compare_turn0(groups: dict[str, list[str]], help0: int = 1) -> str:
    """Turn 0 of the episodes whose turn-0 help decision was ``help0``: the same prompt
    for every episode of a task, so the share of each class per runtime is the model's
    first-turn distribution; each group against the first, stratified by task (the first
    group's task counts as weights), 95% normal intervals."""
    import numpy as np
    import pandas as pd

    import helpdp

    t0 = {}
    for k, dirs in groups.items():
        parts = []
        for d in dirs:
            ds = helpdp.load_dataset(d)
            st = ds.steps[(ds.steps["t"] == 0) & (ds.steps["action"] == help0)]
            task = ds.episodes.set_index("episode_id")["task_id"]
            parts.append(
                pd.DataFrame(
                    {"task": task.reindex(st["episode_id"]).to_numpy(), "cls": turn0_class(st)}
                )
            )
        t0[k] = pd.concat(parts)
    names, classes = list(t0), ["working", "final", "unknown_tool", "other"]
    ref = t0[names[0]]
    lines = [
        "| runtime | turn-0 episodes | " + " | ".join(classes) + " |",
        "|---|---|" + "---|" * len(classes),
    ]
    for k in names:
        d = t0[k]
        cells = [f"{(d['cls'] == c).mean():.3f}" for c in classes]
        common = sorted(set(d["task"]) & set(ref["task"]))
        if k != names[0] and common:
            w = ref["task"].value_counts().reindex(common).astype(float)
            w /= w.sum()
            for i, c in enumerate(classes):
                diff = var = 0.0
                for t in common:
                    a = (ref[ref["task"] == t]["cls"] == c).to_numpy(float)
                    b = (d[d["task"] == t]["cls"] == c).to_numpy(float)
                    pool = (a.sum() + b.sum()) / (len(a) + len(b))
                    diff += w[t] * (b.mean() - a.mean())
                    var += w[t] ** 2 * pool * (1 - pool) * (1 / len(a) + 1 / len(b))
                h = 1.96 * np.sqrt(var)
                cells[i] += f" ({diff:+.3f} [{diff - h:+.3f}, {diff + h:+.3f}])"
        lines.append(f"| {k} | {len(d)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ipw_size(y, k, effect: float = 0.1, power: float = 0.8) -> dict:
    """Episodes for a paired SR difference of ``effect`` between "help at every trigger"
    and the base (two-sided 5%, ``power``): ``y`` success and ``k`` randomised trigger
    states (probability 1/2 each) per episode; importance sampling's per-episode
    variance is 2 E[Y 2^k; k >= 1] (``var``), or 2 E[Y] E[2^k; k >= 1] (``var_smooth``,
    Y independent of k); the larger one is used."""
    from statistics import NormalDist

    import numpy as np

    y, k = np.asarray(y, float), np.asarray(k, float)
    w = 2.0**k * (k >= 1)
    var, var_smooth = float(np.mean(2 * y * w)), float(2 * y.mean() * w.mean())
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(power)
    return {
        "episodes": len(y),
        "success": float(y.mean()),
        "mean_k": float(k.mean()),
        "share_k>=1": float((k >= 1).mean()),
        "var": var,
        "var_smooth": var_smooth,
        "needed": int(round(z**2 * max(var, var_smooth) / effect**2)),
    }


def stage2_size(data: str, effect: float = 0.1, power: float = 0.8) -> dict:
    """:func:`ipw_size` of a stage-2 collection ``data`` (k: its steps with 0 < p_help <
    1); doubly robust estimates do no worse with a useful model. A design-based figure:
    it ignores that tasks cluster."""
    import helpdp

    ds = helpdp.load_dataset(data)
    st, e = ds.steps, ds.episodes.set_index("episode_id")
    k = st[(st["p_help"] > 0) & (st["p_help"] < 1)].groupby("episode_id").size()
    k = k.reindex(e.index, fill_value=0)
    return ipw_size(e["success"].astype(float), k, effect, power)


def main(argv=None) -> list[Result]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runtimes", nargs="+", default=list(RUNTIMES), choices=list(RUNTIMES))
    ap.add_argument("--scenarios", nargs="+", default=list(Schedule.scenarios))
    ap.add_argument("--tasks", type=int, nargs="+", default=list(Schedule.tasks))
    ap.add_argument("--probabilities", type=float, nargs="+", default=list(Schedule.probabilities))
    ap.add_argument("--seeds", type=int, nargs="+", default=list(Schedule.seeds))
    ap.add_argument("--max-turns", type=int, default=0, help="env.max_turns (0: its default)")
    ap.add_argument("--out", default="/tmp/bench-runtimes", help="the collections go here")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--port", type=int, default=8031, help="the llama.cpp front's port")
    ap.add_argument("--llama-python", default=str(ROOT / ".venv-llama" / "bin" / "python"))
    ap.add_argument(
        "--compare",
        nargs="+",
        metavar="NAME=DIR[,DIR]",
        help="compare runtimes' datasets on the same episodes (no collection)",
    )
    ap.add_argument(
        "--turn0",
        nargs="+",
        metavar="NAME=DIR[,DIR]",
        help="turn 0 with help, by class, per runtime (the same prompts; no collection)",
    )
    ap.add_argument(
        "--size",
        metavar="STAGE2_DIR",
        help="episodes a stage-2 collection needs (--effect, 80%% power)",
    )
    ap.add_argument("--effect", type=float, default=0.1)
    args = ap.parse_args(argv)
    if args.compare:
        groups = dict(g.split("=", 1) for g in args.compare)
        print(compare_runtimes({k: v.split(",") for k, v in groups.items()}, args.max_turns))
        return []
    if args.turn0:
        groups = dict(g.split("=", 1) for g in args.turn0)
        print(compare_turn0({k: v.split(",") for k, v in groups.items()}))
        return []
    if args.size:
        print(json.dumps(stage2_size(args.size, args.effect), indent=1))
        return []
    schedule = Schedule(
        tuple(args.scenarios),
        tuple(args.tasks),
        tuple(args.probabilities),
        tuple(args.seeds),
        args.max_turns,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.runtimes:
        results.append(run_one(RUNTIMES[name], schedule, out, args.port, args.llama_python))
        print(format_table(results[-1:]), file=sys.stderr, flush=True)
    print(f"{os.cpu_count()} CPUs; schedule {schedule}")
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in results], indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
