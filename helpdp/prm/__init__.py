"""prm: process reward models that estimate an actor's probability of success at
every state, with and without help, for helpdp's ``rule=paper``.

Fit (``fit_prm`` / ``python -m helpdp.prm.train``), score a dataset into
``scores.parquet`` (``score_dataset`` + ``write_scores`` / ``python -m
helpdp.prm.score``), evaluate (``evaluate`` / ``python -m helpdp.prm.report``) and
self-regulate (``episode_failure_scores``, ``pick_threshold``,
``PRMThresholdPolicy`` / ``python -m helpdp.prm.selfreg``).

Importing prm never imports torch: ``LMPRM`` (``helpdp.prm.lm``) is loaded on first use.
"""

from importlib import import_module

from helpdp.prm.base import PRM, ActorMismatchError, dataset_actor
from helpdp.prm.data import Examples, build_examples, example_weights
from helpdp.prm.load import load_prm
from helpdp.prm.metrics import auroc, brier, ece, fit_temperature, reliability_diagram
from helpdp.prm.tabular import TabularPRM
from helpdp.splits import hash_split, task_splits

# names defined in the command-line modules (and the torch-backed LMPRM) load on
# first use: `python -m helpdp.prm.train` must not find helpdp.prm.train already imported
_LAZY = {
    "LMPRM": "helpdp.prm.lm",
    "evaluate": "helpdp.prm.report",
    "score_dataset": "helpdp.prm.score",
    "write_scores": "helpdp.prm.score",
    "PRMThresholdPolicy": "helpdp.prm.selfreg",
    "classification": "helpdp.prm.selfreg",
    "episode_failure_scores": "helpdp.prm.selfreg",
    "pick_threshold": "helpdp.prm.selfreg",
    "nohelp_scores": "helpdp.prm.selfreg",
    "fit_prm": "helpdp.prm.train",
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
    "evaluate",
    "example_weights",
    "fit_prm",
    "fit_temperature",
    "hash_split",
    "load_prm",
    "nohelp_scores",
    "pick_threshold",
    "reliability_diagram",
    "score_dataset",
    "task_splits",
    "write_scores",
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'prm' has no attribute {name!r}")
