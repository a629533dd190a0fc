"""Rollout speed of the GRPO integration on CPU, and what it says about the GPU scale.

    python bench/train.py [--batches 3] [--group 4] [--prompts 2] [--reps 5]

No training step: :class:`helpdp.train.rollout.AWMRollout` is called as TRL would call
it, with transformers generation from the tiny model (conf/train/cpu_smoke.yaml) and
the oracle expert gated by ``always``. Measured here, on this machine's CPU:

1. a baseline in the same run: one environment driven directly, one call at a time
   (an app worker's start, a reset, a tool-call step, the final step with its
   verifier run) and the gate's decision, each the median of ``--reps``;
2. cold rollout batches (each scenario's first: app workers start) and warm ones
   (the same tasks again: the pool's environments are reused), with each phase's
   wall time and each kind of environment call's thread seconds.

The GPU block is an ESTIMATE, not a measurement: the measured environment and gate
costs per turn, amortised over the demo data's mean episode length, against an
assumed generation time per turn for Qwen3-4B on vLLM from a memory-bandwidth
roofline (its parameters are printed).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from collect.interventions import build_interventions
from helpdp.policies import Always
from helpdp.train.config import train_config
from helpdp.train.envs import build_pool
from helpdp.train.gate import SplitSchedule
from helpdp.train.rollout import (
    AWMRollout,
    GateRules,
    HFBackend,
    RolloutSettings,
    TokenActor,
    task_prompts,
)
from helpdp.train.tiny import build_tiny, world_texts
from helpdp.train.trainer import training_tasks

# ---------------------------------------------------------------------------------------
# the GPU ESTIMATE's assumptions (none of it is measured here; there is no GPU)
# ---------------------------------------------------------------------------------------
# Qwen3-4B (config.json of Qwen/Qwen3-4B): 4.0e9 parameters, 36 layers, 8 KV heads of
# dimension 128. In bf16, one decode step of vLLM reads all weights once and every
# running sequence's KV cache once: memory-bound, so the step's time is about
# bytes / (HBM bandwidth x efficiency) (the usual roofline of LLM decoding).
WEIGHT_BYTES = 4.0e9 * 2
KV_BYTES_PER_TOKEN = 2 * 36 * 8 * 128 * 2  # K and V, layers, KV heads, head dim, bf16
HBM_BYTES_PER_S = {"H100 SXM": 3.35e12, "B200": 8.0e12}  # vendors' data sheets
EFFICIENCY = 0.6  # share of peak bandwidth a decode step reaches (assumed)
CONTEXT_TOKENS = 6000  # mean context of a turn: system prompt + tools + earlier turns (assumed)
TOKENS_PER_TURN = (150, 300)  # tokens the actor generates per turn (the reference recipe's range)
# sequences decoding together on one GPU: the b200 preset (16 per GPU process: 2 prompts
# x 8 rollouts, colocate) and all 128 of a step on one GPU
BATCHES = (16, 128)
HOST_CORES_PER_GPU = 16  # CPU cores for one GPU process's environments (assumed)


def decode_seconds_per_turn(batch: int, bandwidth: float, tokens: int) -> float:
    step = (WEIGHT_BYTES + batch * CONTEXT_TOKENS * KV_BYTES_PER_TOKEN) / (bandwidth * EFFICIENCY)
    return tokens * step


def median_seconds(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def baseline(pool, task: tuple[str, int], reps: int) -> dict[str, float]:
    """One environment, one call at a time: the cost of each kind of call."""
    from collect.awm.protocol import format_call_tool
    from helpdp.policies import StateView
    from helpdp.train.gate import Gate

    name, idx = task
    solution = pool.scenario(name).solutions[idx]
    first = solution.calls[0]
    call = format_call_tool(first["tool_name"], first.get("arguments") or {})
    envs = [pool.acquire(name) for _ in range(reps)]  # new: no app worker yet
    try:
        cold = statistics.median(
            [median_seconds(lambda e=e: e.reset(idx), 1) for e in envs]
        )  # each: an app worker starts
        env = envs[0]
        resets, firsts, steps, finals = [], [], [], []
        for _ in range(reps):  # an episode of 3 turns (max_turns): a call twice, the answer
            resets.append(median_seconds(lambda: env.reset(idx), 1))
            firsts.append(median_seconds(lambda: env.step(call), 1))
            steps.append(median_seconds(lambda: env.step(call), 1))
            finals.append(median_seconds(lambda: env.step("Done."), 1))
    finally:
        for e in envs:
            e.close()
    gate = Gate(Always(), {0: True})
    view = StateView(0, f"{name}/{idx}", 0, "", episode_id=0)
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        gate.decide([view])
    return {
        "cold": cold,
        "reset": statistics.median(resets),
        "first_step": statistics.median(firsts),
        "step": statistics.median(steps),
        "end_step": statistics.median(finals),
        "gate": (time.perf_counter() - t0) / n,
    }


def run_batches(rollout, rows, a, label):
    """Rollout batches; sums of their stats."""
    tot: dict[str, float] = {}
    for b in range(a.batches):
        picked = [rows[(b * a.prompts + i) % len(rows)]["prompt"] for i in range(a.prompts)]
        rollout([p for p in picked for _ in range(a.group)])
        for k, v in rollout.last_stats.items():
            tot[k] = tot.get(k, 0.0) + float(v)
    s = tot
    wall, turns = s["time/wall_s"], s["rollout/turns"]
    # the first version's accounting: everything but generation, gate and expert
    s["old_env_share"] = (
        wall - s["time/generate_s"] - s["gate/seconds"] - s["expert/seconds"]
    ) / wall
    print(
        f"{label}: {a.batches} batches x {a.prompts * a.group} rollouts, {turns:.0f} turns "
        f"in {wall:.2f} s: {turns / wall:.2f} turns/s"
    )
    parts = ["generate", "request", "env", "other"]
    print("  wall shares: " + "  ".join(f"{p} {s[f'time/{p}_s'] / wall:5.1%}" for p in parts))
    print(
        f"  app workers started: {s['env/cold_resets']:.0f}; warm resets: {s['env/resets']:.0f}; "
        f"steps {s['env/steps']:.0f} + ending steps {s['env/end_steps']:.0f}"
    )
    return s


def per(s, kind, count=None):
    n = s[f"env/{count or kind + 's'}"]
    return s[f"env/{kind}_s"] / n if n else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    import pandas as pd
    import torch

    import helpdp

    torch.set_num_threads(2)
    demo = Path(helpdp.__file__).resolve().parent / "data" / "demo" / "episodes.parquet"
    mean_turns = float(pd.read_parquet(demo, columns=["steps"])["steps"].mean())
    cfg = train_config()
    scratch = tempfile.mkdtemp(prefix="helpdp-bench-train-")
    pool = build_pool(cfg, scratch)
    try:
        tasks = training_tasks(cfg, pool)
        rows, lookup = task_prompts(pool, tasks)
        corpus, _ = world_texts(pool, tasks)
        model, tok = build_tiny(cfg.model, corpus)
        backend = HFBackend(lambda: model, tok, temperature=1.0)
        actor = TokenActor(backend, tok, max_turn_tokens=cfg.rollout.max_turn_tokens)
        rollout = AWMRollout(
            pool,
            build_interventions(dict(cfg.interventions)),
            lookup,
            lambda tr: actor,
            Always(),
            SplitSchedule(kind="fixed", n_fixed=4, reference_group=8),
            rules=GateRules(design="proactive", max_per_episode=2),
            settings=RolloutSettings(num_generations=a.group),
        )
        base = baseline(pool, tasks[0], a.reps)
        print(f"baseline, one environment, one call at a time (median of {a.reps}, measured):")
        print(
            f"  app worker start {1000 * base['cold']:.0f} ms | reset {1000 * base['reset']:.1f} ms"
            f" | tool-call step {1000 * base['step']:.1f} ms (the first after a reset "
            f"{1000 * base['first_step']:.1f} ms) | final step with the verifier "
            f"{1000 * base['end_step']:.1f} ms | gate decision {1e6 * base['gate']:.1f} us"
        )
        cold = run_batches(rollout, rows, a, "cold rollouts (measured; each batch a new scenario)")
        warm = run_batches(rollout, rows, a, "warm rollouts (measured; the same tasks again)")
    finally:
        pool.close()
        shutil.rmtree(scratch, ignore_errors=True)
    tps_c = cold["rollout/turns"] / cold["time/wall_s"]
    tps_w = warm["rollout/turns"] / warm["time/wall_s"]
    print(
        f"warm vs cold: {tps_w / tps_c:.2f}x the turns/s; environment wall share "
        f"{cold['time/env_s'] / cold['time/wall_s']:.1%} -> {warm['time/env_s'] / warm['time/wall_s']:.1%}"
        f" (the first version's accounting, wall - generation - gate - expert: "
        f"{cold['old_env_share']:.1%} -> {warm['old_env_share']:.1%})"
    )
    w = {k: per(warm, k) for k in ("reset", "step")}
    w["end_step"] = per(warm, "end_step", "end_steps")
    w["gate"] = warm["gate/seconds"] / warm["gate/calls"] if warm["gate/calls"] else float("nan")
    c_cold = per(cold, "cold_reset")
    print(
        f"  thread seconds per call inside the warm rollouts ({a.prompts * a.group} threads on this"
        f" machine's cores; the tiny model's non-final turns are mostly malformed, so its"
        f" steps rarely reach the app) and the ratio to the baseline:"
    )
    for k, b in (("reset", "reset"), ("step", "step"), ("end_step", "end_step"), ("gate", "gate")):
        print(f"    {k:9s} {1000 * w[k]:8.2f} ms  ({w[k] / base[b]:.1f}x the baseline)")
    print(
        f"    app worker start inside the cold batches {1000 * c_cold:.0f} ms "
        f"({c_cold / base['cold']:.1f}x the baseline)"
    )

    n = mean_turns
    env_turn = ((n - 2) * base["step"] + base["first_step"] + base["end_step"] + base["reset"]) / n
    env_turn_cold = env_turn + base["cold"] / n
    print(
        f"per turn at the reference recipe's episode length (the demo data's mean, {n:.2f} turns per episode;"
        f" baseline costs): environment {1000 * env_turn:.1f} ms = (reset + first step + "
        f"{n - 2:.2f} steps + final step with the verifier) / {n:.2f}; {1000 * env_turn_cold:.1f} ms if every "
        f"episode also starts an app worker (a scenario not seen before); gate "
        f"{1e3 * base['gate']:.3f} ms"
    )
    print(
        "GPU ESTIMATE (not measured; Qwen3-4B on vLLM, memory-bandwidth roofline: weights "
        f"{WEIGHT_BYTES / 1e9:.0f} GB + {KV_BYTES_PER_TOKEN // 1024} KiB KV per token x "
        f"{CONTEXT_TOKENS} tokens of context per sequence, {EFFICIENCY:.0%} of peak bandwidth;"
        f" environments on {HOST_CORES_PER_GPU} cores per GPU process):"
    )
    for gpu, bw in HBM_BYTES_PER_S.items():
        for batch in BATCHES:
            lo, hi = (decode_seconds_per_turn(batch, bw, t) for t in TOKENS_PER_TURN)
            rounds = max(1.0, batch / HOST_CORES_PER_GPU)  # environment calls per core per round
            env = rounds * env_turn
            gate = batch * base["gate"]  # the gate decides one episode at a time
            share = [(env + gate) / (g + env + gate) for g in (lo, hi)]
            share_cold = [
                (rounds * env_turn_cold + gate) / (g + rounds * env_turn_cold + gate)
                for g in (lo, hi)
            ]
            print(
                f"  {gpu:8s} {batch:3d} sequences: generation {lo:.2f}-{hi:.2f} s per turn "
                f"({TOKENS_PER_TURN[0]}-{TOKENS_PER_TURN[1]} tokens at "
                f"{TOKENS_PER_TURN[0] / lo:.0f} tokens/s per sequence); gate + environment "
                f"{1000 * (env + gate):.0f} ms = {min(share):.1%}-{max(share):.1%} of a turn "
                f"({min(share_cold):.1%}-{max(share_cold):.1%} with a new app worker per episode)"
            )


if __name__ == "__main__":
    main()
