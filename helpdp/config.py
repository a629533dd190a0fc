"""The numerical settings several commands share (:class:`SolverConfig`: search, frontier,
label, forecast extend it); each command's own config sits beside its body
(``helpdp/search.py``: ``SearchConfig``, ``helpdp/pareto.py``: ``FrontierConfig``).

``--help`` of each command (:func:`cliconf.run_app`) is generated from the ``help``
metadata below, so the text a user reads is the text declared next to the field.
"""

from __future__ import annotations

from dataclasses import dataclass

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
