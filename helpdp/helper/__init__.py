"""The helper (paper Sec. 6): a text classifier that imitates the budgeted DP's decisions.

``python -m helpdp.label`` writes the labels, ``python -m helpdp.helper.train``
fits the classifier, ``python -m helpdp.evaluate.calibrate`` re-picks its thresholds
by realised calls in the deployment worlds, ``HelperPolicy`` deploys it
(``decide(views)``), and ``HelperPipeline`` is the same decisions as a transformers
pipeline (:mod:`helpdp.helper.pipeline`). Importing
this package does not import torch: the torch-backed names load on first use.
"""

from importlib import import_module

from helpdp.helper.config import HelperModelConfig, HelperTrainConfig
from helpdp.helper.policy import HelperPolicy
from helpdp.models.minilm import MiniLMUnavailable, minilm_dir
from helpdp.policies import StateView

_LAZY = {
    "train_helper": "helpdp.helper.train",
    "HelperPipeline": "helpdp.helper.pipeline",
    "HelperNet": "helpdp.models.encoder",
    "state_header": "helpdp.helper.features",
}

__all__ = [
    "HelperModelConfig",
    "HelperNet",
    "HelperPipeline",
    "HelperPolicy",
    "HelperTrainConfig",
    "MiniLMUnavailable",
    "StateView",
    "minilm_dir",
    "state_header",
    "train_helper",
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'helpdp.helper' has no attribute {name!r}")
