"""Hydra config schemas of helpdp's commands; every field documented here, once.

``--help`` of each command is generated from the ``help`` metadata below, so the
text a user reads is the text declared next to the field.
"""

from __future__ import annotations

import copy
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore


def doc_field(default: Any, help: str) -> Any:
    """A dataclass field with its documentation (``help``, shown by ``--help``).

    Mutable defaults (lists, dicts, dataclass instances) become a factory of deep
    copies, so instances never share them. Every config schema declares its fields
    with this, so each field is documented once, where it is declared.
    """
    if isinstance(default, list | dict) or is_dataclass(default):
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


_f = doc_field


@dataclass
class SolverConfig:
    """Numerical settings shared by search and frontier."""

    rule: str = _f(
        "exact",
        "exact: Lagrangian value iteration on the count model (optimal for each r). "
        "paper: the paper's usage/policy iteration with PRM scores from scores.parquet "
        "(help iff r < dp/dM).",
    )
    gamma: Any = _f(None, "discount; null takes the manifest's gamma")
    tol: float = _f(
        1e-10, "stop sweeps when the largest change of V, S, M is below this (graphs with cycles)"
    )
    max_iters: int = _f(
        100_000, "most sweeps per solve on graphs with cycles (the paper rule's max iterations)"
    )
    tie_tol: float = _f(1e-12, "an action with more help must beat one with less by more than this")
    dm_tol: float = _f(
        1e-9, "paper rule: |dM| at or below this means 'no usage difference' -> nohelp"
    )


@dataclass
class SearchConfig(SolverConfig):
    """`python -m helpdp.search`: find the help cost r whose policy meets a budget."""

    data: Any = _f(
        None, "dataset directory (CONTRACT section 1); null runs on the embedded demo dataset"
    )
    budget: Any = _f(
        1.0,
        "expected expert calls per episode allowed (E[U] <= budget); a list sweeps several budgets",
    )
    budgets: dict = _f(
        {},
        "K > 1 interventions: per-intervention budgets, e.g. budgets.expert=1.0 budgets.oracle=0.5",
    )
    out: str = _f("outputs/search", "output directory (search.json, policy.parquet, ...)")
    max_solves: int = _f(200, "most solves one budget search may use")
    quiet: bool = _f(False, "print only the final line")


@dataclass
class FrontierConfig(SolverConfig):
    """`python -m helpdp.frontier`: every breakpoint of the usage-success frontier."""

    data: Any = _f(None, "dataset directory; null runs on the embedded demo dataset")
    budget: Any = _f(1.0, "budget to mark on the plot (null: none)")
    out: str = _f("outputs/frontier", "output directory (frontier.parquet, frontier.png)")
    max_solves: int = _f(5000, "most solves the frontier trace may use")


def field_help_lines(schema: type, prefix: str = "", indent: str = "  ") -> list[str]:
    """``name=default`` and its declared help for every field of ``schema``; a field
    whose default is itself a dataclass is listed as ``name.*`` and expanded."""
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


def help_template(schema: type, app: str, extra: tuple[str, ...] = ()) -> str:
    """A Hydra help page: the schema's docstring, every field with its declared help
    (``extra`` lines after them), then the resolved config."""
    lines = [app, f"  {(schema.__doc__ or '').strip()}", "", "Fields (override as key=value):"]
    lines += field_help_lines(schema)
    lines += [
        *extra,
        "",
        "Resolved config:",
        "$CONFIG",
        "Use --hydra-help for Hydra's own options.",
    ]
    return "\n".join(lines).replace("${", "$\\{")


def register_help(name: str, schema: type, app: str, extra: tuple[str, ...] = ()) -> None:
    """Store ``app``'s help page as ``hydra/help=<name>`` (select it in the primary
    config's defaults: ``override hydra/help: <name>``)."""
    node = {
        "app_name": app,
        "header": "",
        "footer": "",
        "template": help_template(schema, app, extra),
    }
    ConfigStore.instance().store(group="hydra/help", name=name, node=node)


def register() -> None:
    cs = ConfigStore.instance()
    for name, schema, app in [
        ("search", SearchConfig, "python -m helpdp.search"),
        ("frontier", FrontierConfig, "python -m helpdp.frontier"),
    ]:
        cs.store(name=f"{name}_schema", node=schema)
        register_help(name, schema, app)
