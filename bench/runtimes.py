"""Episodes per hour of the real CPU actor under each runtime, on one schedule, in one run.

    make real-actor llama-server              # the weights; llama-cpp-python in .venv-llama
    python bench/runtimes.py --out /tmp/runtimes --json /tmp/runtimes.json
    python bench/runtimes.py --runtimes hf-1w llama-2x1 --seeds 0 --max-turns 6   # smaller

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
    rt: Runtime, schedule: Schedule, out: str | Path, base_url: str | None = None,
    python: str = sys.executable,
) -> list[str]:  # fmt: skip
    """The ``python -m collect`` command line of ``rt`` on ``schedule``."""
    cmd = [python, "-m", "collect", f"out={out}", f"collect/actor={rt.preset}",
           "actor.call_format=lenient", f"executor.workers={rt.workers}",
           "executor.shard_size=1", "executor.batch_size=1", "keep_shards=true",
           "overwrite=true", "progress=false", *schedule.overrides()]  # fmt: skip
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

    from collect.realserve import ServeConfig, serve

    ds = out / rt.name
    cpu0, t0 = _children_cpu(), time.time()
    with LoadSampler() as load:
        server = contextlib.nullcontext(None)
        if rt.slots:
            server = serve(
                ServeConfig(slots=rt.slots, threads=rt.threads, port=port, python=llama_python,
                            log_dir=str(out / f"{rt.name}-server"))
            )  # fmt: skip
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
        rt.name, rt.note, n, wall, n / wall * 3600.0, steady_rate(finished, rt.workers),
        _children_cpu() - cpu0, statistics.mean(load.samples), quality(ds),
    )  # fmt: skip


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
    args = ap.parse_args(argv)
    schedule = Schedule(tuple(args.scenarios), tuple(args.tasks), tuple(args.probabilities),
                        tuple(args.seeds), args.max_turns)  # fmt: skip
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
