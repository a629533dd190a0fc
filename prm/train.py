"""``python -m prm.train data=DIR out=PRMDIR [prm=tiny|qwen3_0_6b|qwen3_4b|tabular] [kind=tabular|lm]``

Fits a PRM on the training tasks of a dataset and saves it (``prm.json`` records
the actor, the actions, the task split and the whole configuration, so that
scoring, reports and self-regulation reuse exactly the same split).
"""

from __future__ import annotations

import json
import logging
import platform
import sys
from importlib import metadata

from helpdp import load_dataset
from helpdp.cliconf import as_config, run_app, to_dict
from helpdp.cliconf.progress import Stages
from helpdp.splits import SPLITS, task_splits
from prm.base import FIT_STAGES, KINDS, PRM, dataset_actor
from prm.config import PRMModelConfig, PRMTrainConfig, prm_name
from prm.data import build_examples

log = logging.getLogger(__name__)


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("numpy", "pandas", "torch", "transformers", "peft", "tokenizers"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


#: what ``train``'s bar counts: ``STAGES_LM`` for ``kind=lm`` (its fit's stages between)
STAGES_TABULAR = ("building examples", "fitting", "saving")
STAGES_LM = ("building examples", "building the model", *FIT_STAGES, "saving")


def fit_prm(ds, cfg, stage=None) -> tuple[PRM, dict]:
    """Fit the PRM ``cfg`` (a ``PRMTrainConfig``-shaped mapping) describes on ``ds``.

    Returns the PRM and a summary (examples per split, losses for ``kind=lm``).
    ``stage(name)``: called as each stage of ``STAGES_TABULAR``/``STAGES_LM`` after
    the first begins.
    """
    stage = stage or (lambda name: None)
    cfg = as_config(PRMTrainConfig, cfg)
    model_cfg = as_config(PRMModelConfig, cfg.prm)
    kind = cfg.kind or model_cfg.kind
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    model_cfg.kind = kind
    bad = [s for s in cfg.fit_splits if s not in SPLITS]
    if bad or not cfg.fit_splits:
        raise ValueError(
            f"fit_splits must be a non-empty subset of {SPLITS}, got {list(cfg.fit_splits)}"
        )
    splits = task_splits(
        ds, val_fraction=cfg.val_fraction, test_fraction=cfg.test_fraction, seed=cfg.split_seed
    )
    stage("building examples")
    examples = build_examples(
        ds, splits, label_source=cfg.label_source, weighting=cfg.weighting, weight_n0=cfg.weight_n0
    )
    fit = examples.select(list(cfg.fit_splits))
    if len(fit) == 0:
        raise ValueError(f"{ds.path}: no examples in fit_splits {list(cfg.fit_splits)}")
    per_split = {s: int((examples.frame["split"] == s).sum()) for s in SPLITS}
    tasks = {s: int((splits == s).sum()) for s in SPLITS}
    meta = {
        "actor": dataset_actor(ds),
        "actions": list(ds.actions),
        "train_data": None if ds.path is None else str(ds.path),
        "split": {
            "val_fraction": cfg.val_fraction,
            "test_fraction": cfg.test_fraction,
            "seed": cfg.split_seed,
            "from_episodes": ds.episodes is not None and "split" in ds.episodes.columns,
        },
        "fit_splits": list(cfg.fit_splits),
        "label_source": examples.label_source,
        "weighting": {"scheme": cfg.weighting, "n0": cfg.weight_n0},
        "examples": per_split,
        "tasks": tasks,
        "train_config": {k: v for k, v in to_dict(cfg).items() if k not in ("prm", "out", "data")},
        "versions": _versions(),
    }
    summary = {"kind": kind, "actor": meta["actor"], "examples": per_split, "tasks": tasks}
    if kind == "tabular":
        from prm.tabular import TabularPRM

        meta["config"] = to_dict(model_cfg)
        stage("fitting")
        prm = TabularPRM.fit(ds, fit, prior_strength=model_cfg.prior_strength, meta=meta)
        return prm, summary
    from prm.lm import LMPRM

    stage("building the model")
    texts = fit.frame["text"].unique().tolist()
    if not any(texts):
        log.warning(
            "%s: every state text is empty; an LM PRM can only learn per-action base rates", ds.path
        )
    prm = LMPRM.create(
        model_cfg,
        actions=ds.actions,
        actor=meta["actor"],
        texts=texts,
        device=cfg.device,
        meta=meta,
    )
    val = None if "validation" in cfg.fit_splits else examples.select("validation")
    history = prm.fit(fit, val, progress=cfg.progress, stage=stage)
    prm.meta["history"] = history
    summary.update({k: v for k, v in history.items() if k != "epochs"})
    return prm, summary


def train(cfg) -> dict:
    """Load ``cfg.data``, fit, save to ``cfg.out``; returns the summary (also printed,
    as JSON on the last line)."""

    cfg = as_config(PRMTrainConfig, cfg)
    model_cfg = as_config(PRMModelConfig, cfg.prm)
    kind = cfg.kind or model_cfg.kind
    names = STAGES_LM if kind == "lm" else STAGES_TABULAR
    # the data first (a second; its errors stay one line, before any bar), then a labelled
    # bar from the first second of the work: loading a backbone and scoring take minutes
    ds = load_dataset(cfg.data)
    with Stages(f"prm.train prm={prm_name(model_cfg, kind)}", names, cfg.progress) as stage:
        prm, summary = fit_prm(ds, cfg, stage=stage)
        stage("saving")
        out = prm.save(cfg.out)
    summary["out"] = str(out)
    print(f"trained a {summary['kind']} PRM for actor {summary['actor']!r} -> {out}")
    print(json.dumps(summary, default=str))
    return summary


def main() -> None:
    """Command line: ``key=value`` overrides of conf/prm_train.yaml (fields: --help)."""
    run_app("prm.train", PRMTrainConfig, train, config_name="prm_train", groups=("prm",))


if __name__ == "__main__":
    sys.exit(main())
