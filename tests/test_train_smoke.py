"""The CPU smoke GRPO run (conf/train/cpu_smoke.yaml): a tiny Qwen3 from config, the
demo worlds, the oracle expert behind the gate, TRL's GRPOTrainer with our rollout_func."""

from __future__ import annotations

import csv
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from collect.interventions import InterventionConfig, Oracle  # noqa: E402
from helpdp.train.config import train_config  # noqa: E402
from helpdp.train.trainer import build_trainer  # noqa: E402


class Counting(Oracle):
    """The oracle, recording every call that reaches it (and so the environment)."""

    calls: list = []

    def help(self, view, env, rng):
        Counting.calls.append((view.spec.episode_id, view.turn))
        return super().help(view, env, rng)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("grpo")
    cfg = train_config([f"out={out}", "progress=false"])
    Counting.calls = []
    t0 = time.perf_counter()
    trainer, rollout, pool = build_trainer(
        cfg,
        work_root=str(out / "scratch"),
        interventions=[Counting("expert", InterventionConfig())],
    )
    lora0 = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora" in n}
    outputs = []
    inner = rollout.__call__

    try:
        trainer.rollout_func = lambda prompts, tr: outputs.append(inner(prompts, tr)) or outputs[-1]
        trainer.train()
    finally:
        pool.close()
    seconds = time.perf_counter() - t0
    return trainer, rollout, outputs, lora0, out, seconds


def test_loss_logged_to_the_log_csv_and_tensorboard(run):
    trainer, rollout, outputs, _, out, seconds = run
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    assert len(losses) == 2 and all(isinstance(x, float) for x in losses)
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    assert [int(r["step"]) for r in rows] == [1, 2]
    for key in (
        "loss",
        "reward",
        "rollout/completion_rate",
        "rollout/format_error_rate",
        "expert/calls_blind",
        "expert/calls_recovery",
        "phase/expert_rollouts",
        "gate/decisions",
    ):
        assert key in rows[0], key
    assert list((out / "tb").glob("events.out.tfevents.*"))


def test_lora_parameters_changed(run):
    trainer, _, _, lora0, _, _ = run
    after = {n: p.detach() for n, p in trainer.model.named_parameters() if "lora" in n}
    assert lora0 and set(after) == set(lora0)
    changed = sum(not torch.equal(lora0[n], after[n]) for n in lora0)
    assert changed > 0


def test_tool_output_tokens_are_masked(run):
    trainer, rollout, outputs, _, _, _ = run
    tok = trainer.processing_class
    multi = 0
    for out in outputs:
        for ids, mask, turns in zip(out["completion_ids"], out["env_mask"], out["turns"]):
            assert len(ids) == len(mask)
            sampled = tok.decode([i for i, m in zip(ids, mask) if m])
            feedback = tok.decode([i for i, m in zip(ids, mask) if not m])
            assert "<tool_response>" not in sampled and "<|im_start|>" not in sampled
            if turns >= 2:
                multi += 1
                assert feedback.count("<tool_response>") == turns - 1
    assert multi > 0
    # TRL counted only the sampled tokens: its completion length is the mask's sum
    logged = [r["completions/mean_length"] for r in trainer.state.log_history if "loss" in r]
    expect = [sum(map(sum, o["env_mask"])) / len(o["env_mask"]) for o in outputs]
    assert logged == pytest.approx(expect)


def test_gate_decisions_are_exactly_the_expert_calls(run):
    _, rollout, outputs, _, _, _ = run
    granted = {(d["episode_id"], d["t"]) for d in rollout.decisions if d["action"]}
    assert granted and granted == set(Counting.calls) and len(Counting.calls) == len(granted)
    for out in outputs:  # solo rollouts never reach the expert; the caps hold
        for role, calls in zip(out["role"], out["expert_calls"]):
            assert calls <= 2 and (role == "expert" or calls == 0)
        assert sum(out["expert_calls"]) <= 8
    # the adaptive split: expert-heavy first (rate assumed 1), then from the seen rate
    assert rollout.history[0]["phase/expert_rollouts"] == 6
