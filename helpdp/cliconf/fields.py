"""Config fields declared once, with their documentation, and typed configs built from
plain mappings (what the commands' plain functions accept, so tests call them
without Hydra)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import MISSING, field, fields, is_dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from omegaconf import DictConfig

T = TypeVar("T")

__all__ = ["as_config", "doc_field", "field_help_lines", "to_dict"]


def doc_field(default: T, help: str) -> T:
    """A dataclass field with its documentation (``help``, shown by ``--help``).

    Mutable defaults (lists, dicts, dataclass instances) become a factory of deep
    copies, so instances never share them. Every config schema declares its fields
    with this, so each field is documented once, where it is declared.
    """
    if isinstance(default, list | dict) or is_dataclass(default):
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


def field_help_lines(schema: type, prefix: str = "", indent: str = "  ") -> list[str]:
    """``name=default`` and its declared help for every field of ``schema`` (the
    schema's own defaults; ``--help`` shows the resolved values instead, see
    :func:`cliconf.help_text`); a dataclass-valued field is expanded as ``name.*``."""
    lines = []
    for f in fields(schema):
        default = f.default if f.default is not MISSING else f.default_factory()
        name = prefix + f.name
        doc = f.metadata.get("help", "")
        if is_dataclass(default):
            lines.append(f"{indent}{name}.*: {doc}")
            lines += field_help_lines(type(default), name + ".", indent + "  ")
        else:
            lines.append(f"{indent}{name}={default!r}")
            lines.append(f"{indent}    {doc}")
    return lines


def to_dict(cfg: object) -> dict:
    """A plain dict of an OmegaConf node, a dataclass instance or a mapping."""
    from omegaconf import OmegaConf

    if isinstance(cfg, dict):
        return dict(cfg)
    if OmegaConf.is_config(cfg):
        return OmegaConf.to_container(cfg, resolve=True)
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)


def as_config(
    schema: type, cfg: object = None, /, *, instance: bool = False, **overrides: object
) -> object:
    """A config of ``schema`` from ``cfg`` (an instance, an OmegaConf node or a plain
    dict) plus ``overrides``, checked against the schema's fields and types.

    Returns a typed OmegaConf node, or with ``instance=True`` a ``schema`` instance. A
    dict-valued field that ``cfg`` gives replaces the schema's default dict (a dataset's
    interventions are the ones named, not those plus the default ones).
    """
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, schema) and not overrides:
        return cfg if instance else OmegaConf.structured(cfg)
    base = OmegaConf.structured(schema)
    for given in (cfg, overrides):
        if given is None or (given is overrides and not overrides):
            continue
        data = to_dict(given)
        for f in fields(schema):
            node = base._get_node(f.name) if f.name in data else None
            if isinstance(node, DictConfig) and not _is_dataclass_node(node):
                base[f.name] = {}
        base = OmegaConf.merge(base, data)
    return OmegaConf.to_object(base) if instance else base


def _is_dataclass_node(node: DictConfig) -> bool:
    from omegaconf import OmegaConf

    t = OmegaConf.get_type(node)
    return t is not None and dataclasses.is_dataclass(t)
