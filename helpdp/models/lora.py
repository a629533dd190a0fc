"""LoRA settings, declared once for every model that takes them (the helper,
``helpdp/helper/config.py``, and the PRM, ``prm/config.py``): a nested field ``lora.*``
(``helper.lora.r=16``, ``prm.lora.r=8``) whose defaults each app picks with
:func:`lora_field`. No torch import here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from helpdp.cliconf import doc_field as _f
from helpdp.jsonvalue import JSON

__all__ = ["LoRAConfig", "lora_field", "lora_settings"]


@dataclass
class LoRAConfig:
    """LoRA adapters (peft) on the backbone's linear layers."""

    r: int = _f(
        8,
        "rank of the adapters; 0: no adapters (the helper then fine-tunes every weight; "
        "the PRM needs r >= 1)",
    )
    alpha: float = _f(16.0, "scaling numerator (scale = alpha / r)")
    dropout: float = _f(0.0, "dropout on the LoRA branch")
    target_modules: list[str] | None = _f(
        None,
        "module names the adapters wrap; null: the backbone's default (every attention and "
        "MLP projection of Qwen3; query, key, value and dense of BERT)",
    )


def lora_field(help: str, **defaults: JSON) -> LoRAConfig:
    """A ``lora: LoRAConfig`` dataclass field with this app's ``defaults`` (``r=0``)."""
    return field(default_factory=lambda: LoRAConfig(**defaults), metadata={"help": help})


def lora_settings(cfg: Mapping[str, JSON]) -> dict:
    """``{r, alpha, dropout, target_modules}`` of a model config as saved with a trained
    model (a mapping: its JSON, or a config node): its ``lora`` mapping, or the flat ``lora_r``/``lora_alpha``/``lora_dropout``/
    ``target_modules`` of configs saved before the nested field."""
    lora = cfg.get("lora")
    if lora is not None:
        return {k: lora.get(k) for k in ("r", "alpha", "dropout", "target_modules")}
    return {
        "r": cfg.get("lora_r"),
        "alpha": cfg.get("lora_alpha"),
        "dropout": cfg.get("lora_dropout"),
        "target_modules": cfg.get("target_modules"),
    }
