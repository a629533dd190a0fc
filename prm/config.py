"""Hydra schemas of the PRM stages, registered in Hydra's ConfigStore.

One dataclass per config group; every field is documented once, in its ``help``
metadata: here, or, for the LM fields the PRM shares with the helper (backbone, tokenizer
cut, LoRA, optimisation), in ``helpdp/models/config.py`` (``TextModelConfig``, which
``PRMModelConfig`` extends); ``python -m prm.train --help`` lists them all. A trained
PRM reads its saved config back typed through :func:`saved_lm_config`. The YAML files in
``conf/`` only choose values:

* ``conf/prm/*.yaml`` — group ``prm``, schema ``PRMModelConfig`` (the model:
  ``tiny``, ``minilm``, ``qwen3_0_6b``, ``qwen3_4b``, ``tabular``);
* ``conf/prm_train.yaml`` — ``PRMTrainConfig``; ``conf/prm_score.yaml`` —
  ``ScoreConfig``; ``conf/prm_report.yaml`` — ``ReportConfig``;
  ``conf/prm_selfreg.yaml`` — ``SelfRegConfig``.

``prm=`` chooses the model (the group ``conf/prm/``) in ``prm.train``; the later
stages name a trained PRM's directory with ``prm_dir=``. Every app is wired by
:func:`cliconf.run_app`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from helpdp.cliconf import doc_field as _f
from helpdp.jsonvalue import JSON
from helpdp.models.config import TextModelConfig, override


@dataclass
class PRMModelConfig(TextModelConfig):
    """Group ``prm``: which estimator and its hyper-parameters. The fields it shares with
    the helper (declared and documented in ``helpdp.models.config``) are for ``kind=lm``."""

    kind: str = _f(
        "lm", "'lm' (causal LM + scalar head, LoRA) or 'tabular' (rates from the counts)"
    )
    # --- tabular ---
    prior_strength: float = _f(
        2.0, "tabular: Beta prior strength alpha (pseudo-visits) toward the backed-off estimate"
    )
    # --- lm: the shared fields (TextModelConfig) with the PRM's defaults ---
    epochs: int = override("epochs", 3)
    # --- lm: the PRM's own ---
    revision: str | None = _f(None, "lm: revision (branch, tag or commit) of base_model")
    trust_remote_code: bool = _f(False, "lm: let transformers run the checkpoint's own code")
    num_kv_heads: int = _f(2, "lm, base_model=null: key/value heads (grouped-query attention)")
    max_grad_norm: float = _f(1.0, "lm: gradient clipping norm (0 disables)")
    max_train_examples: int | None = _f(
        None, "lm: train on a random subset of this many examples (null: all)"
    )


def saved_lm_config(saved: Mapping[str, JSON]) -> PRMModelConfig:
    """The typed view of a PRM's saved config (``prm.json`` ``config``, the dict
    ``PRMModelConfig`` was saved as): a field an older file lacks reads as the LM PRM
    always read it (``warmup_ratio`` 0, ``eval_batch_size`` 64, no clipping), the others
    as their defaults."""
    return PRMModelConfig.from_saved(saved, warmup_ratio=0.0, eval_batch_size=64, max_grad_norm=0.0)


@dataclass
class PRMTrainConfig:
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

    data: str = _f(
        "???", "dataset directory to score; by default scores.parquet is written into it"
    )
    prm_dir: str = _f("???", "PRM directory written by prm.train")
    out: str | None = _f(
        None,
        "where to write the scores; null: DATA/scores.parquet, inside the dataset folder; "
        "an existing file is replaced only if it holds scores of prm.score (overwrite=true "
        "when they differ)",
    )
    overwrite: bool = _f(False, "replace an out= file that holds other scores written by prm.score")
    allow_other_actor: bool = _f(
        False, "score a dataset collected with another actor than the PRM's"
    )
    device: str = _f("auto", "auto|cpu|cuda|cuda:N (lm only)")
    progress: bool = _f(True, "tqdm progress bars")


@dataclass
class ReportConfig:
    """``python -m prm.report``: discrimination and calibration per split."""

    data: str = _f("???", "dataset directory")
    prm_dir: str = _f("???", "PRM directory written by prm.train")
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
    """``python -m prm.selfreg``: predict episode success from the PRM (paper Sec. 4.2)."""

    data: str = _f("???", "dataset directory with steps.parquet")
    prm_dir: str = _f("???", "PRM directory written by prm.train")
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
    "prm_train": PRMTrainConfig,
    "prm_score": ScoreConfig,
    "prm_report": ReportConfig,
    "prm_selfreg": SelfRegConfig,
}


def prm_name(model_cfg, kind: str) -> str:
    """The name a bar gives the PRM: its backbone, its checkpoint's last path part, or
    the kind (``tabular``; ``tiny`` for an LM built from its config)."""
    if kind == "tabular":
        return "tabular"
    if model_cfg.backbone:
        return str(model_cfg.backbone)
    return (
        str(model_cfg.base_model).rstrip("/").rsplit("/", 1)[-1] if model_cfg.base_model else "tiny"
    )
