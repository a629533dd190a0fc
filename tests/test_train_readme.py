"""The plug-in example of docs/grpo.md ("Plugging a helper into any TRL GRPO run") runs, as
written there, for one GRPO step: the tiny Qwen3, the demo worlds, the oracle gated by
`Always()`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "docs" / "grpo.md"


def _snippet() -> str:
    text = README.read_text()
    section = text[text.index("Plugging a helper into any TRL GRPO run") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_plug_in_example_runs_one_step(tmp_path, monkeypatch):
    pytest.importorskip("trl")
    import torch
    from trl import GRPOConfig

    from collect.awm.env import EnvConfig, EnvPool
    from collect.interventions import InterventionConfig, build_interventions
    from helpdp.policies import Always
    from helpdp.train.config import ModelConfig
    from helpdp.train.envs import worlds_dir
    from helpdp.train.tiny import build_tiny, world_texts

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(2)
    config = EnvConfig(max_turns=2, terminate_on_format_error=False, work_root=str(tmp_path / "w"))
    pool = EnvPool(worlds_dir(None), config, scenarios=["smart_home_1"])
    tasks = [("smart_home_1", 0), ("smart_home_1", 1)]
    model, tok = build_tiny(ModelConfig(), world_texts(pool, tasks)[0])
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=256,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        logging_steps=1,
        save_strategy="no",
    )
    names = {
        "pool": pool,
        "tasks": tasks,
        "expert": build_interventions({"expert": InterventionConfig(kind="oracle")})[0],
        "policy": Always(),
        "model": model,
        "tok": tok,
        "args": args,
    }
    try:
        exec(compile(_snippet(), "docs/grpo.md", "exec"), names)
    finally:
        pool.close()
    trainer, rollout = names["trainer"], names["rollout"]
    assert trainer.state.global_step == 1 and rollout.episodes == 4
    assert any("loss" in row for row in trainer.state.log_history)
    assert len(rollout.last_output["completion_ids"]) == 4
    granted = [d for d in rollout.decisions if d["action"]]
    assert sum(rollout.last_output["expert_calls"]) == len(granted) > 0  # budget: every rollout
