"""Hydra config schemas of helpdp's commands; every field documented here, once.

``--help`` of each command (:func:`cliconf.run_app`) is generated from the ``help``
metadata below, so the text a user reads is the text declared next to the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helpdp.cliconf import doc_field as _f


@dataclass
class SolverConfig:
    """Numerical settings shared by search and frontier."""

    rule: str = _f(
        "exact",
        "exact: Lagrangian value iteration on the count model (optimal for each r). "
        "paper: the usage/policy iteration of Min et al. (2025) with PRM scores from scores.parquet "
        "(help iff r < dp/dM).",
    )
    gamma: float | None = _f(None, "discount; null takes the manifest's gamma")
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
        None, "dataset directory (docs/data-format.md); null runs on the embedded demo dataset"
    )
    budget: Any = _f(
        1.0,
        "expected expert calls per episode allowed (E[U] <= budget); a list sweeps several budgets",
    )
    budgets: dict = _f(
        {},
        "K > 1 interventions: per-intervention budgets, e.g. budgets.expert=1.0 budgets.oracle=0.5",
    )
    out: str = _f(
        "outputs/search",
        "output directory (search.json, policy.parquet, ...), relative to the current "
        "directory (make demo writes outputs/ inside the checkout); a list of budgets "
        "writes OUT/budget=<value>/ each",
    )
    max_solves: int = _f(200, "most solves one budget search may use")
    method: str = _f(
        "auto",
        "auto: answer budgets from the per-task frontier trace where it applies (rule=exact, "
        "one intervention, acyclic graph), else by solves; frontier: the trace only; solves: "
        "the chord search over solves",
    )
    quiet: bool = _f(False, "print only the final line")


@dataclass
class FrontierConfig(SolverConfig):
    """`python -m helpdp.frontier`: every breakpoint of the usage-success frontier."""

    data: Any = _f(None, "dataset directory; null runs on the embedded demo dataset")
    budget: Any = _f(1.0, "budget to mark on the plot (null: none)")
    out: str = _f(
        "outputs/frontier",
        "output directory (frontier.parquet, frontier.png), relative to the current directory",
    )
    max_solves: int = _f(5000, "most solves the frontier trace may use")
    method: str = _f(
        "auto",
        "auto: the per-task trace (one pass over every task) where it applies, else the "
        "solve-based recursion; frontier: the trace only; solves: the recursion",
    )
