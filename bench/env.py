"""Speed of the AWM runtime: app start, reset, one tool call, one verifier run, episode
throughput, and a collection on a held-out world against the shipped one.

    python bench/env.py                      # demo worlds (collect/worlds)
    python bench/env.py --data DIR --n 500   # any AWM-format directory with solutions or tasks
    python bench/env.py --collect-rounds 0   # without the collections

Prints a table of median and p95 latencies and the steps/s of a scripted
episode loop (reset, list_tools, the reference solution's calls, final answer
+ verification) with 2 app worker processes driven from 2 threads. "app" is
the time the request spent inside the app (measured in the worker), so
"overhead" = the rest of the sandboxed call path (parse, validate, IPC, ASGI).

One episode, one app: an app that is not a shipped demo world's gets, with
``env.fresh_app`` (the default), an app process no earlier episode touched. Measured
in the same run, on the same scenario, for each way to get there:

* ``reuse``: the shipped world's app keeps its worker, only the database is restored
  (``env.reuse_shipped_apps``; the baseline of every ratio);
* ``exec``: a new bubblewrap and Python per episode (``env.sandbox.start=exec``);
* ``fork``: a child of the environment's template (``env.sandbox.start=fork``, the
  default); each with the app loaded in the foreground at the reset, and prestarted
  (``env.prestart_app``: the next episode's app loads while an episode runs; the bench
  waits for it before each timed reset, as after an episode long enough to hide it).

"app start" is the mean time from asking for an app to its OpenAPI document (start
or fork, and the app's own load). For the fork in the foreground, the start's phases
(medians over the timed resets): the template's part (end the previous child, compile,
fork; "spawn" up to the child's hello) and the child's load (copy the database, exec
the app, its OpenAPI document when the parent lacks it, open the database), wall and
CPU milliseconds as the worker measured them. The tool-call rows time one call with and
without the rendering every observation gets before it reaches a model
(``render_observation``), in the same loop. The two collections run the same schedule on the
shipped worlds and on a copy whose every app has one byte more (a held-out world:
nothing of it is reused); their time ratio is the price of untrusted code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from collect.awm.dataset import AWMDataset
from collect.awm.env import EnvConfig, EnvPool
from collect.awm.observation import render_observation
from collect.awm.sandbox import SandboxLimits
from collect.awm.tools import format_tools
from collect.worlds import WORLDS_DIR

#: (label, EnvConfig overrides, sandbox.start) of each way to run an episode's app
MODES = (
    ("reuse (database restore, shipped worlds)", {"fresh_app": False}, "fork"),
    ("exec, foreground start", {"prestart_app": False}, "exec"),
    ("exec, prestarted", {"prestart_app": True}, "exec"),
    ("fork, foreground start", {"prestart_app": False}, "fork"),
    ("fork, prestarted", {"prestart_app": True}, "fork"),
)


@dataclass
class ModeResult:
    label: str
    resets: list[float]  # ms
    app_start_ms: float | None  # mean, per app started (None: no app started per episode)
    steps_s: float
    loop_text: str
    phases: dict[str, list[float]]  # fork: "phase (wall|cpu)" -> ms per timed reset


def _call_text(tool: str, arguments: dict) -> str:
    payload = {
        "name": "call_tool",
        "arguments": {"tool_name": tool, "arguments": json.dumps(arguments)},
    }
    return "<tool_call>" + json.dumps(payload) + "</tool_call>"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _scripts(dataset: AWMDataset) -> list[tuple[str, int, list[dict], str]]:
    """(scenario, task_idx, calls, final answer) for every reference solution."""
    out = []
    for name in dataset.names():
        sc = dataset.get(name)
        if not (sc.has("env") and sc.has("db") and sc.has("tasks")):
            continue
        for idx, sol in sorted(sc.solutions.items()):
            out.append((name, idx, sol.calls, sol.final_answer or "Done."))
    return out


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def _measure_mode(dataset, mode, name, task_idx, scripts, n, episodes) -> ModeResult:
    label, overrides, start = mode
    config = EnvConfig(
        verifier_workers=2,
        sandbox=SandboxLimits(start=start),
        **{"reuse_shipped_apps": False, **overrides},
    )
    with EnvPool(dataset, config) as pool:
        env = pool.acquire(name)
        env.reset(task_idx)
        times: list[float] = []
        phases: dict[str, list[float]] = {}
        for _ in range(n):
            if env._spare is not None:  # as after an episode long enough to hide the start
                env._spare.result()
            t = time.perf_counter()
            env.reset(task_idx)
            times.append((time.perf_counter() - t) * 1000)
            if env.fresh_app:  # a new app's load at each reset
                _add_phases(phases, getattr(env.app, "load_info", None) or {})
        per_app = env.app_start_seconds / env.app_starts * 1000 if env.fresh_app else None
        pool.release(env)
        steps_s, _eps, text = _episode_loop(pool, name, scripts, episodes)
    return ModeResult(label, times, per_app, steps_s, text, phases)


def _add_phases(phases: dict[str, list[float]], info: dict) -> None:
    """A forked app's start, phase by phase (:attr:`ForkedApp.load_info`)."""
    for key, ms in (info.get("spawn") or {}).items():
        label = "spawn, to the child's hello" if key == "total" else f"template: {key}"
        phases.setdefault(label, []).append(ms)
    for key, (wall, cpu) in (info.get("phases") or {}).items():
        phases.setdefault(f"child: {key} (wall)", []).append(wall)
        phases.setdefault(f"child: {key} (cpu)", []).append(cpu)
    if info.get("cpu_ms") is not None and info.get("spawn"):
        phases.setdefault("child: CPU from fork to loaded", []).append(info["cpu_ms"])


def _call_rows(dataset, name, task_idx, read_call, n) -> list[tuple[str, list[float], str]]:
    """One tool call (total, in the app, overhead) and one verifier run, on the baseline."""
    rows = []
    with EnvPool(dataset, EnvConfig(verifier_workers=2)) as pool:
        env = pool.acquire(name)
        text = _call_text(read_call["tool_name"], read_call.get("arguments") or {})
        env.reset(task_idx)
        totals, apps, renders, sizes = [], [], [], []
        for _ in range(n):
            t = time.perf_counter()
            result = env.step(text)
            t1 = time.perf_counter()
            render_observation(result.observation)  # what reaches a model's context
            renders.append((time.perf_counter() - t1) * 1000)
            totals.append((t1 - t) * 1000)
            apps.append(result.info.get("app_ms") or 0.0)
            sizes.append(len(result.observation))
            if result.done:
                env.reset(task_idx)
        overhead = [a - b for a, b in zip(totals, apps, strict=True)]
        rendered = [a + b for a, b in zip(totals, renders, strict=True)]
        note = f"{statistics.median(sizes):.0f} characters"
        rows.append((f"call_tool {read_call['tool_name']} (step, no rendering)", totals, note))
        rows.append(("  app time inside the worker", apps, ""))
        rows.append(("  runtime overhead (step - app)", overhead, ""))
        rows.append(("  render_observation of its output", renders, ""))
        rows.append(("call_tool + rendering", rendered, _ratio(rendered, totals)))
        rows.append(_render_row(env))
        verifies = []
        for _ in range(max(20, n // 3)):
            t = time.perf_counter()
            v = env.verify(None)
            verifies.append((time.perf_counter() - t) * 1000)
        rows.append(("verifier run (export + copy + run)", verifies, f"outcome={v.outcome}"))
        pool.release(env)
    return rows


def _ratio(a: list[float], b: list[float]) -> str:
    return f"{statistics.median(a) / statistics.median(b):.4f}x the step's median"


def _render_row(env) -> tuple[str, list[float], str]:
    """The rendering of the largest observation of the scenario: its tool list."""
    text = format_tools(env.tools)
    times = []
    for _ in range(200):
        t = time.perf_counter()
        render_observation(text)
        times.append((time.perf_counter() - t) * 1000)
    return ("render_observation of the tool list", times, f"{len(text)} characters")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(WORLDS_DIR), help="AWM-format directory")
    parser.add_argument("--n", type=int, default=300, help="samples per latency measurement")
    parser.add_argument("--episodes", type=int, default=60, help="episodes per thread in the loop")
    parser.add_argument(
        "--collect-tasks",
        type=int,
        default=0,
        help="tasks of each collection (shipped vs held-out worlds; schedule seed 0); 0: all",
    )
    parser.add_argument(
        "--collect-rounds", type=int, default=2, help="alternating collection rounds; 0: none"
    )
    parser.add_argument(
        "--collect-exec", action="store_true", help="also collect the held-out worlds with exec"
    )
    args = parser.parse_args(argv)

    dataset = AWMDataset(args.data)
    scripts = _scripts(dataset)
    if not scripts:
        print(f"no runnable scenario with reference solutions in {args.data}", file=sys.stderr)
        return 1
    name, task_idx, calls, _answer = scripts[0]
    read_call = next(
        (c for _, _, cs, _ in scripts for c in cs if c["tool_name"].startswith(("list", "get"))),
        calls[0],
    )
    print(f"AWM runtime benchmark: {args.data} (scenario {name}); at the start: {_load()}")
    n_fresh = max(10, args.n // 10)
    results = []
    for mode in MODES:
        n = args.n if mode[0].startswith("reuse") else n_fresh
        episodes = args.episodes if mode[0].startswith("reuse") else args.episodes // 3 or 1
        results.append(_measure_mode(dataset, mode, name, task_idx, scripts, n, episodes))
    rows = _call_rows(dataset, name, task_idx, read_call, args.n)
    _print_modes(results)
    print(f"{'measurement':<50}{'median ms':>11}{'p95 ms':>10}{'n':>6}")
    print("-" * 77)
    for label, values, note in rows:
        med, p95 = statistics.median(values), _pct(values, 0.95)
        print(f"{label:<50}{med:>11.3f}{p95:>10.3f}{len(values):>6}  {note}".rstrip())
    if args.collect_rounds > 0 and Path(args.data).resolve() == Path(WORLDS_DIR).resolve():
        _collections(args.collect_tasks, args.collect_rounds, args.collect_exec)
    print(f"at the end: {_load()}")
    return 0


def _print_modes(results: list[ModeResult]) -> None:
    base = results[0]
    base_reset = statistics.median(base.resets)
    print(f"{'an episode app':<42}{'start ms':>9}{'reset ms':>10}{'p95':>9}{'steps/s':>9}")
    print("-" * 95)
    for r in results:
        med, p95 = statistics.median(r.resets), _pct(r.resets, 0.95)
        start = f"{r.app_start_ms:>9.0f}" if r.app_start_ms is not None else f"{'-':>9}"
        ratio = "" if r is base else f"  {r.steps_s / base.steps_s:.2f}x steps/s"
        ratio += "" if r is base else f", reset {med / base_reset:.0f}x"
        print(f"{r.label:<42}{start}{med:>10.2f}{p95:>9.2f}{r.steps_s:>9.0f}{ratio}")
        print(f"{'':<42}  n={len(r.resets)} resets; loop: {r.loop_text}")
    print("-" * 95)
    for r in results:
        if r.phases:
            print(f"where the start goes, {r.label} (median ms)")
            for key, values in r.phases.items():
                print(f"  {key:<40}{statistics.median(values):>9.2f}")


def _held_out_copy(root: Path) -> Path:
    """The shipped worlds with one byte added to every app's source (nothing reused)."""
    root.mkdir(parents=True)
    for src in Path(WORLDS_DIR).iterdir():
        if src.suffix not in (".jsonl", ".txt"):
            continue
        text = src.read_text()
        if src.name == "gen_envs.jsonl":
            lines = []
            for line in text.splitlines():
                rec = json.loads(line)
                rec["full_code"] += "\n"
                lines.append(json.dumps(rec))
            text = "\n".join(lines) + "\n"
        (root / src.name).write_text(text)
    return root


def _collections(tasks: int, rounds: int, with_exec: bool) -> None:
    """The same schedule on the shipped worlds and on a held-out copy (fork; exec), in
    alternating rounds (a shared machine's load drifts): each round's ratio and the total's."""
    from collect.collector import collect, collect_config

    with tempfile.TemporaryDirectory(prefix="bench-env-") as tmp:
        held_out = _held_out_copy(Path(tmp) / "worlds")
        runs = [("shipped worlds (reuse)", WORLDS_DIR, "fork")]
        runs.append(("held-out worlds, fork", held_out, "fork"))
        if with_exec:
            runs.append(("held-out worlds, exec", held_out, "exec"))
        totals = dict.fromkeys([label for label, _, _ in runs], 0.0)
        for k in range(rounds):
            first = None
            for label, worlds, start in runs:
                out = Path(tmp) / f"out-{k}-{start}-{len(label)}"
                overrides = [f"out={out}", f"worlds={worlds}", "schedule.seeds=[0]"]
                overrides += [f"schedule.max_tasks={tasks}"] if tasks > 0 else []
                overrides += ["progress=false", f"env.sandbox.start={start}"]
                overrides += [f"env.work_root={Path(tmp) / 'scratch'}"]
                t = time.perf_counter()
                result = collect(collect_config(overrides))
                seconds = time.perf_counter() - t
                totals[label] += seconds
                first = first or seconds
                note = "" if first == seconds else f"  {seconds / first:.2f}x the shipped worlds'"
                print(
                    f"collection {k + 1}, {label:<24}{seconds:>8.1f} s  "
                    f"{result.episodes} episodes{note}  ({_load()})"
                )
        base = totals[runs[0][0]]
        for label, seconds in totals.items():
            if seconds != base:
                print(f"collections, {label}: {seconds / base:.2f}x the shipped worlds' time")


def _episode_loop(pool: EnvPool, name: str, scripts: list, episodes: int) -> tuple:
    """2 threads x 1 app worker each on the first scenario's scripts: (steps/s, episodes/s, text)."""
    envs = [pool.acquire(name) for _ in range(2)]
    mine = [s for s in scripts if s[0] == name]
    counts = [0, 0]
    outcomes: list[str] = []

    def loop(i: int) -> None:
        e = envs[i]
        for k in range(episodes):
            _, idx, cs, answer = mine[(k + i) % len(mine)]
            e.reset(idx)
            e.step('<tool_call>{"name": "list_tools", "arguments": null}</tool_call>')
            counts[i] += 1
            for c in cs:
                e.step(_call_text(c["tool_name"], c.get("arguments") or {}))
                counts[i] += 1
            final = e.step(answer)
            counts[i] += 1
            outcomes.append(final.info["outcome"])

    t = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t
    for e in envs:
        pool.release(e)
    steps = sum(counts)
    complete = sum(o == "complete" for o in outcomes)
    text = (
        f"{len(outcomes) / elapsed:.2f} episodes/s, {steps} steps, "
        f"{complete}/{len(outcomes)} complete"
    )
    return steps / elapsed, len(outcomes) / elapsed, text


if __name__ == "__main__":
    sys.exit(main())
