"""Speed of the AWM runtime: reset, one tool call, one verifier run, episode throughput.

    python bench/env.py                      # demo worlds (collect/worlds)
    python bench/env.py --data DIR --n 500   # any AWM-format directory with solutions or tasks

Prints a table of median and p95 latencies and the steps/s of a scripted
episode loop (reset, list_tools, the reference solution's calls, final answer
+ verification) with 2 app worker processes driven from 2 threads. "app" is
the time the request spent inside the app (measured in the worker), so
"overhead" = the rest of the sandboxed call path (parse, validate, IPC, ASGI).

One episode, one app: ``env.fresh_app`` (the default) starts every
episode on an app worker that no earlier episode touched. The reset and the
episode loop are measured both ways in the same run: ``fresh_app=false`` (the
baseline: only the database restored), ``fresh_app=true`` without and with the
background start of the next episode's app (``prestart_app``); the ratios are
printed against the baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

from collect.awm.dataset import AWMDataset
from collect.awm.env import EnvConfig, EnvPool
from collect.worlds import WORLDS_DIR


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(WORLDS_DIR), help="AWM-format directory")
    parser.add_argument("--n", type=int, default=300, help="samples per latency measurement")
    parser.add_argument("--episodes", type=int, default=60, help="episodes per thread in the loop")
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
    rows: list[tuple[str, list[float] | None, str]] = []

    n_fresh = max(10, args.n // 10)
    fresh_rows: list[tuple[str, list[float] | None, str]] = []
    loops: dict[str, tuple[float, float, str]] = {}
    for label, fresh, prestart in (
        ("reset, fresh app (foreground start)", True, False),
        ("reset, fresh app (prestarted)", True, True),
    ):
        with EnvPool(
            dataset,
            EnvConfig(
                verifier_workers=2, fresh_app=fresh, prestart_app=prestart, reuse_shipped_apps=False
            ),
        ) as pool:
            env = pool.acquire(name)
            env.reset(task_idx)
            times = []
            for _ in range(n_fresh):
                if prestart and env._spare is not None:  # as after an episode of ~1 s
                    env._spare.result()
                t = time.perf_counter()
                env.reset(task_idx)
                times.append((time.perf_counter() - t) * 1000)
            fresh_rows.append(
                (label, times, f"app start {env.app_start_seconds / env.app_starts * 1000:.0f} ms")
            )
            pool.release(env)
            loops[label] = _episode_loop(pool, name, scripts, args.episodes // 3 or 1)

    with EnvPool(dataset, EnvConfig(verifier_workers=2, fresh_app=False)) as pool:
        env = pool.acquire(name)
        t0 = time.perf_counter()
        env.reset(task_idx)
        cold = time.perf_counter() - t0
        resets = []
        for _ in range(args.n):
            t = time.perf_counter()
            env.reset(task_idx)
            resets.append((time.perf_counter() - t) * 1000)
        rows.append(("reset (restore database: fresh_app=false)", resets, ""))
        rows.extend(fresh_rows)

        text = _call_text(read_call["tool_name"], read_call.get("arguments") or {})
        env.reset(task_idx)
        totals, apps = [], []
        for _ in range(args.n):
            t = time.perf_counter()
            result = env.step(text)
            totals.append((time.perf_counter() - t) * 1000)
            apps.append(result.info.get("app_ms") or 0.0)
            if result.done:
                env.reset(task_idx)
        overhead = [a - b for a, b in zip(totals, apps, strict=True)]
        rows.append((f"call_tool {read_call['tool_name']} (step)", totals, ""))
        rows.append(("  app time inside the worker", apps, ""))
        rows.append(("  runtime overhead (step - app)", overhead, ""))

        verifies = []
        for _ in range(max(20, args.n // 3)):
            t = time.perf_counter()
            v = env.verify(None)
            verifies.append((time.perf_counter() - t) * 1000)
        rows.append(("verifier run (export + copy + run)", verifies, f"outcome={v.outcome}"))
        pool.release(env)
        base = _episode_loop(pool, name, scripts, args.episodes)

    mine = [s for s in scripts if s[0] == name]
    print(f"AWM runtime benchmark: {args.data} (scenario {name}, {len(mine)} scripted tasks)")
    print(f"first reset incl. worker start: {cold * 1000:.0f} ms")
    print(f"{'measurement':<50}{'median ms':>11}{'p95 ms':>10}{'n':>6}")
    print("-" * 77)
    base_reset = statistics.median(resets)
    for label, values, note in rows:
        med, p95 = statistics.median(values), _pct(values, 0.95)
        if label.startswith("reset, fresh"):
            note = f"{note}; {med / base_reset:.0f}x the database restore"
        print(f"{label:<50}{med:>11.3f}{p95:>10.3f}{len(values):>6}  {note}".rstrip())
    print("-" * 77)
    print(f"{'episode loop, 2 workers, fresh_app=false':<50}{base[0]:>11.0f} steps/s   {base[2]}")
    for label, (steps_s, _eps_s, text) in loops.items():
        print(
            f"{'episode loop, ' + label.removeprefix('reset, '):<50}{steps_s:>11.0f} steps/s   "
            f"{text}; {steps_s / base[0]:.2f}x the baseline's steps/s"
        )
    return 0


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
