"""Rollout speed of the GRPO integration on CPU: turns/s with the tiny Qwen3, and the
share of a turn spent in the help gate and in the environment (+ expert).

    python bench/train.py [--batches 3] [--group 4] [--prompts 2]

No training step: :class:`helpdp.train.rollout.AWMRollout` is called as TRL would call
it, with transformers generation from the tiny model (conf/train/cpu_smoke.yaml). The
GPU line is an ESTIMATE, not a measurement: it keeps the measured gate + environment
seconds per turn and replaces generation by an assumed vLLM time per turn.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

# bench/collect.py would shadow the collect package: keep this folder off sys.path
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from cliconf import as_config, compose_config  # noqa: E402
from collect.interventions import build_interventions  # noqa: E402
from helpdp.policies import Always  # noqa: E402
from helpdp.train.config import TrainConfig  # noqa: E402
from helpdp.train.envs import build_pool  # noqa: E402
from helpdp.train.gate import SplitSchedule  # noqa: E402
from helpdp.train.rollout import AWMRollout, HFBackend, TokenActor, task_prompts  # noqa: E402
from helpdp.train.tiny import build_tiny, world_texts  # noqa: E402
from helpdp.train.trainer import training_tasks  # noqa: E402

# assumption for the estimate: Qwen3-4B, vLLM, 128 rollouts in lock step on one B200,
# ~150 tokens per turn at ~2,500 tokens/s per sequence-batch slot -> ~0.06 s per turn
# of wall time amortised over the batch (an assumption, not measured here)
GPU_SECONDS_PER_TURN = 0.06


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=2)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    cfg = as_config(TrainConfig, compose_config("train", [], node=TrainConfig), instance=True)
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
            pool, build_interventions(dict(cfg.interventions)), lookup, lambda tr: actor,
            Always(), SplitSchedule(kind="fixed", n_fixed=4, reference_group=8),
            design="proactive", max_per_episode=2, num_generations=a.group,
        )  # fmt: skip
        rollout([rows[0]["prompt"]])  # warm-up: start the app workers
        turns = wall = gen = gate = env = expert = 0.0
        for b in range(a.batches):
            picked = [rows[(b * a.prompts + i) % len(rows)]["prompt"] for i in range(a.prompts)]
            t0 = time.perf_counter()
            rollout([p for p in picked for _ in range(a.group)])
            dt = time.perf_counter() - t0
            s = rollout.last_stats
            wall += dt
            turns += s["rollout/turns"]
            gen += s["time/generate_share"] * dt
            gate += s["time/gate_share"] * dt
            env += s["time/env_share"] * dt
            expert += s["time/expert_share"] * dt
    finally:
        pool.close()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"CPU, tiny Qwen3 ({a.batches} batches x {a.prompts * a.group} rollouts, measured):")
    print(f"  {turns:.0f} turns in {wall:.2f}s: {turns / wall:.2f} turns/s")
    print(f"  generation {gen / wall:6.1%}  gate {gate / wall:6.2%}  environment {env / wall:6.1%}"
          f"  expert (oracle) {expert / wall:6.2%}")  # fmt: skip
    per_turn = (gate + env) / turns
    print(f"  gate + environment: {1000 * per_turn:.1f} ms of wall time per turn "
          f"(lock step, {a.prompts * a.group} episodes stepping in threads)")  # fmt: skip
    share = per_turn / (per_turn + GPU_SECONDS_PER_TURN)
    print(f"GPU ESTIMATE (not measured): with {GPU_SECONDS_PER_TURN * 1000:.0f} ms of generation "
          f"per turn, gate + environment would be {share:.1%} of a turn")  # fmt: skip


if __name__ == "__main__":
    main()
