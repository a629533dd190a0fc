"""Benchmark of the one-pass collector.

    python bench/collection.py                    # everything (a few minutes on 2 cores)
    python bench/collection.py --agg-steps 1e6    # quicker aggregation part

Reports, as medians over ``--repeats`` runs:

* simulated collection with 1 worker (in this process) and 2 worker processes:
  episodes/s and steps/s, and the scaling ratio 2 workers / 1 worker;
* the environment alone: ms per step of the sandboxed app replaying reference
  solutions (``AWMEnv.step``, incl. the verifier at the end), and the whole
  collection's ms per step (environment + schedule + oracle + state keys + texts +
  records) for ``state_key=history`` and ``state_key=db`` (which digests the
  database at every step);
* aggregation: seconds to build the dataset tables from shards holding 10^7
  synthetic steps (DuckDB group-bys), and to write them;
* the per-step overhead next to a typical vLLM step. ASSUMPTION (not measured
  here, no GPU): one agent turn of a ~4B model served by vLLM takes ~0.5-2 s of
  wall time per episode (a few hundred generated tokens at ~200-1000 tokens/s per
  sequence in a batch). The overhead is reported as a share of 0.5 s and 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from collect.awm.dataset import AWMDataset
from collect.awm.env import EnvPool
from collect.collector import collect, collect_config
from collect.rollout import STATE_SCHEMA, STEP_SCHEMA, episode_schema
from collect.shards import ShardStore, aggregate, table_bytes
from collect.worlds import WORLDS_DIR
from helpdp.contract import write_table

VLLM_STEP_S = (0.5, 2.0)  # documented assumption, see the module doc


def collection(workers: int, key: str, repeats: int, probabilities: str) -> dict:
    rates = []
    for r in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = collect_config(
                [
                    f"out={tmp}/ds",
                    f"env.work_root={tmp}/work",
                    f"executor.workers={workers}",
                    f"state_key={key}",
                    f"schedule.probabilities={probabilities}",
                    f"schedule.seed={r}",
                    "progress=false",
                ]
            )
            t0 = time.perf_counter()
            res = collect(cfg)
            dt = time.perf_counter() - t0
        rates.append((res.episodes / dt, res.steps / dt, dt, res.episodes, res.steps))
    med = lambda i: statistics.median(x[i] for x in rates)  # noqa: E731
    return {
        "workers": workers,
        "state_key": key,
        "episodes": rates[0][3],
        "steps": rates[0][4],
        "seconds": med(2),
        "episodes_per_s": med(0),
        "steps_per_s": med(1),
        "ms_per_step": 1000 / med(1),
    }


def env_only(repeats: int) -> dict:
    """ms per step of the environment replaying every reference solution."""
    ds = AWMDataset(WORLDS_DIR)
    times, steps = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        from collect.awm.env import EnvConfig

        pool = EnvPool(ds, EnvConfig(work_root=tmp, expert_enabled=False))
        try:
            envs = {name: pool.acquire(name) for name in pool.names()}
            for env in envs.values():
                env.reset(0)  # start the workers outside the timing
            for _ in range(repeats):
                t0, n = time.perf_counter(), 0
                for name, env in envs.items():
                    sc = pool.scenario(name)
                    for idx, sol in sorted(sc.solutions.items()):
                        env.reset(idx)
                        env.step(
                            '<tool_call>\n{"name": "list_tools", "arguments": null}\n</tool_call>'
                        )
                        for c in sol.calls:
                            call = {
                                "tool_name": c["tool_name"],
                                "arguments": json.dumps(c["arguments"]),
                            }
                            env.step(
                                "<tool_call>\n"
                                + json.dumps({"name": "call_tool", "arguments": call})
                                + "\n</tool_call>"
                            )
                        env.step(sol.final_answer or "Done.")
                        n += len(sol.calls) + 2
                times.append((time.perf_counter() - t0) * 1000 / n)
                steps = n
        finally:
            pool.close()
    return {"steps": steps, "ms_per_step": statistics.median(times)}


def synthetic_shards(root: Path, n_steps: int, n_shards: int, seed: int = 0) -> ShardStore:
    """Shards shaped like a history-key collection: episodes of 1-16 steps over a tree
    of states whose first levels are shared (a start state per task, 4 and 16 branches
    below it), deeper states unique to their episode."""
    rng = np.random.default_rng(seed)
    store = ShardStore(root)
    store.dir.mkdir(parents=True, exist_ok=True)
    per = n_steps // n_shards
    kinds = pa.array(["call_tool", "list_tools", "final", "invalid"])
    for i in range(n_shards):
        lengths = rng.integers(1, 17, size=per // 6)
        lengths = lengths[np.cumsum(lengths) <= per]
        n_ep, n = len(lengths), int(lengths.sum())
        first = np.cumsum(lengths) - lengths
        last = first + lengths - 1
        local = np.repeat(np.arange(n_ep), lengths)
        g = local.astype(np.int64) + i * 10**9
        t = (np.arange(n) - first[local]).astype(np.int32)
        task = rng.integers(0, 1000, size=n_ep)
        tk, c1, c2 = task[local], rng.integers(0, 4, n_ep)[local], rng.integers(0, 4, n_ep)[local]
        state = np.select(
            [t == 0, t == 1, t == 2],
            [tk + 1, (1 << 40) + tk * 1000 + 100 + c1, (1 << 40) + tk * 1000 + 200 + c1 * 4 + c2],
            (1 << 50) + g * 32 + t,
        ).astype(np.int64)
        success = rng.random(n_ep) < 0.5
        terminal_id = -(g[first] * 2 + success) - 1
        nxt = np.empty(n, np.int64)
        nxt[:-1] = state[1:]
        nxt[last] = terminal_id
        steps = pa.table(
            {
                "episode_id": g,
                "t": t,
                "state_id": state,
                "action": rng.integers(0, 2, size=n).astype(np.int8),
                "next_state_id": nxt,
                "help": pa.array(np.where(rng.random(n) < 0.5, "", "oracle")),
                "kind": kinds.take(rng.integers(0, 4, size=n)),
                "tool_name": pa.nulls(n, pa.string()),
                "failure": pa.nulls(n, pa.string()),
                "format_error": np.zeros(n, bool),
                "prompt_tokens": np.full(n, 1000, np.int32),
                "completion_tokens": np.full(n, 50, np.int32),
                "valid": np.ones(n, bool),
            },
            schema=STEP_SCHEMA,
        )
        depth = np.concatenate([t, lengths.astype(np.int32)])
        term = np.concatenate([np.zeros(n, bool), np.ones(n_ep, bool)])
        states = pa.table(
            {
                "state_id": np.concatenate([state, terminal_id]),
                "task_id": pa.array(np.concatenate([tk, task]).astype(str)),
                "depth": depth,
                "is_start": depth == 0,
                "terminal": term,
                "success": np.concatenate([np.zeros(n, bool), success]),
                "text": pa.array(np.full(n + n_ep, "", object), pa.string()),
                "episode_id": np.concatenate([g, g[first]]),
                "t": depth,
                "valid": np.ones(n + n_ep, bool),
            },
            schema=STATE_SCHEMA,
        )
        zeros32, zeros64 = np.zeros(n_ep, np.int32), np.zeros(n_ep, np.int64)
        episodes = pa.table(
            {
                "episode_id": g[first],
                "task_id": pa.array(task.astype(str)),
                "scenario": pa.array(np.full(n_ep, "synthetic", object), pa.string()),
                "task_idx": task.astype(np.int32),
                "split": pa.array(np.full(n_ep, "train", object), pa.string()),
                "seed": zeros64,
                "trigger_p": np.full(n_ep, 0.5),
                "steps": lengths.astype(np.int32),
                "success": success,
                "outcome": pa.array(np.where(success, "complete", "others")),
                "end_reason": pa.array(np.full(n_ep, "final", object), pa.string()),
                "reward": success.astype(float),
                "reward_type": pa.array(np.full(n_ep, "code", object), pa.string()),
                "valid": np.ones(n_ep, bool),
                **{
                    c: zeros32
                    for c in (
                        "expert_calls",
                        "blind_calls",
                        "recovery_calls",
                        "format_errors",
                        "errors",
                        "policy_errors",
                    )
                },
                **{c: zeros64 for c in ("tokens", "prompt_tokens", "expert_tokens")},
                "error": pa.array(np.full(n_ep, "", object), pa.string()),
                "p_oracle": np.full(n_ep, 0.5),
                "calls_oracle": zeros32,
            },
            schema=episode_schema(["oracle"]),
        )
        blobs = {
            "steps": table_bytes(steps),
            "states": table_bytes(states),
            "episodes": table_bytes(episodes),
        }
        store.write(i, blobs)
    return store


def cpu_scaling() -> float:
    """Throughput of 2 CPU-bound processes over 1 on this machine (a control for the
    worker scaling: shared or throttled cores scale less than their count)."""
    import multiprocessing

    rates = []
    ctx = multiprocessing.get_context("spawn")
    for n in (1, 2):
        with ctx.Pool(n) as pool:
            pool.map(_spin, range(n))  # warm up
            t0 = time.perf_counter()
            pool.map(_spin, range(2 * n))
            rates.append(2 * n / (time.perf_counter() - t0))
    return rates[1] / rates[0]


def _spin(_: int) -> int:
    s = 0
    for i in range(5_000_000):
        s += i
    return s


def aggregation(n_steps: int, n_shards: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        store = synthetic_shards(Path(tmp), n_steps, n_shards)
        files = [store.files(t, n_shards) for t in ("steps", "states", "episodes")]
        times, tables = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            tables = aggregate(*files)
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for name, table in tables.items():
            write_table(table, Path(tmp) / f"{name}.parquet")
        write_s = time.perf_counter() - t0
    return {
        "steps": tables["steps"].num_rows,
        "states": tables["states"].num_rows,
        "transitions": tables["transitions"].num_rows,
        "shards": n_shards,
        "aggregate_s": statistics.median(times),
        "write_s": write_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement (medians)")
    ap.add_argument(
        "--probabilities",
        default="[0.0,0.1,0.3,0.5,0.7,0.9,1.0]",
        help="trigger probabilities of the speed runs (x 3 seeds: the demo's 630 episodes)",
    )
    ap.add_argument("--agg-steps", type=float, default=1e7, help="synthetic steps to aggregate")
    ap.add_argument("--agg-shards", type=int, default=200, help="shards holding them")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args()

    out: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        }
    }
    print(f"machine: {os.cpu_count()} CPUs, {platform.platform()}", flush=True)
    out["env_only"] = env_only(args.repeats)
    print(f"environment alone: {out['env_only']['ms_per_step']:.2f} ms/step", flush=True)
    runs = [collection(w, "history", args.repeats, args.probabilities) for w in (1, 2)]
    runs.append(collection(1, "db", args.repeats, args.probabilities))
    out["collection"] = runs
    for r in runs:
        print(
            f"collection workers={r['workers']} state_key={r['state_key']}: {r['episodes']} episodes, "
            f"{r['steps']} steps in {r['seconds']:.1f} s: {r['episodes_per_s']:.1f} episodes/s, "
            f"{r['steps_per_s']:.1f} steps/s, {r['ms_per_step']:.2f} ms/step",
            flush=True,
        )
    out["scaling_2_over_1"] = runs[1]["episodes_per_s"] / runs[0]["episodes_per_s"]
    out["cpu_scaling_2_over_1"] = cpu_scaling()
    print(
        f"scaling 2 workers / 1 worker: {out['scaling_2_over_1']:.2f}x (pure-CPU control on this "
        f"machine: {out['cpu_scaling_2_over_1']:.2f}x)",
        flush=True,
    )
    for label, r in (("history", runs[0]), ("db", runs[2])):
        ms = r["ms_per_step"]
        share = [ms / 1000 / s for s in VLLM_STEP_S]
        out[f"overhead_{label}"] = {
            "ms_per_step": ms,
            "share_of_vllm_step": dict(zip(map(str, VLLM_STEP_S), share)),
        }
        print(
            f"per-step overhead (environment + collector, state_key={label}): {ms:.1f} ms = "
            f"{100 * share[0]:.1f}% of a 0.5 s / {100 * share[1]:.2f}% of a 2 s vLLM step (assumed)",
            flush=True,
        )
    agg = aggregation(int(args.agg_steps), args.agg_shards, args.repeats)
    out["aggregation"] = agg
    print(
        f"aggregation: {agg['steps']:,} steps in {agg['shards']} shards -> {agg['states']:,} states, "
        f"{agg['transitions']:,} transitions in {agg['aggregate_s']:.2f} s (writing them: {agg['write_s']:.2f} s)",
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
