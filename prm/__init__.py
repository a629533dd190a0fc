"""prm: process reward models that estimate an actor's probability of success at
every state, with and without help, for helpdp's ``rule=paper``.

Fit (``fit_prm`` / ``python -m prm.train``), score a dataset into
``scores.parquet`` (``score_dataset`` + ``write_scores`` / ``python -m
prm.score``), evaluate (``prm_metrics`` / ``python -m prm.report``) and
self-regulate (``episode_failure_scores``, ``pick_threshold``,
``PRMThresholdPolicy`` / ``python -m prm.selfreg``).

Importing prm never imports torch: ``LMPRM`` (``prm.lm``) is loaded on first use.
"""

from importlib import import_module

from helpdp.splits import hash_split, task_splits
from prm.base import PRM, ActorMismatchError, dataset_actor
from prm.data import Examples, build_examples, example_weights
from prm.load import load_prm
from prm.metrics import auroc, brier, ece, fit_temperature, reliability_diagram
from prm.tabular import TabularPRM

# names defined in the command-line modules (and the torch-backed LMPRM) load on
# first use: `python -m prm.train` must not find prm.train already imported
_LAZY = {
    "LMPRM": "prm.lm",
    "prm_metrics": "prm.report",
    "score_dataset": "prm.score",
    "write_scores": "prm.score",
    "PRMThresholdPolicy": "prm.selfreg",
    "classification": "prm.selfreg",
    "episode_failure_scores": "prm.selfreg",
    "pick_threshold": "prm.selfreg",
    "nohelp_scores": "prm.selfreg",
    "fit_prm": "prm.train",
}

__all__ = [
    "PRM",
    "ActorMismatchError",
    "Examples",
    "LMPRM",
    "PRMThresholdPolicy",
    "TabularPRM",
    "auroc",
    "brier",
    "build_examples",
    "classification",
    "dataset_actor",
    "ece",
    "episode_failure_scores",
    "example_weights",
    "fit_prm",
    "fit_temperature",
    "hash_split",
    "load_prm",
    "nohelp_scores",
    "pick_threshold",
    "prm_metrics",
    "reliability_diagram",
    "score_dataset",
    "task_splits",
    "write_scores",
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'prm' has no attribute {name!r}")
