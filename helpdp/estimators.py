"""The off-policy estimators of ``helpdp.ope``: one registry, one signature, one allow list.

Each estimator is a function ``per_task(terms, quantity, counts, g, task) -> (B, K)``:
its value of one quantity (``SR``, ``U_<k>``) per task under each replicate of
``counts`` (``(B, n_episodes)``: how often each episode is drawn; ``g``
``(n_episodes, K)``: the episodes' tasks one-hot; ``task`` ``(n_episodes,)``: their
codes), from the :class:`Terms` that ``helpdp.ope`` computes once per policy. It is
registered by name (:func:`register`) in :data:`REGISTRY`, which ``helpdp.ope.estimate``
dispatches on: a registered estimator is computable at once.

``helpdp.select`` may value candidates only with an estimator of
:data:`COVERAGE_CHECKED`, the allow list of those whose intervals were checked to cover
(``bench/ope_coverage.py``; docs/ope.md's coverage table, which a test compares with it).
Any other, a new one included, is refused with :func:`refusal`'s line until it is added
there with its row in that table (docs/ope.md, "Adding an estimator").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from helpdp._src import ope as ko

__all__ = [
    "COVERAGE_CHECKED",
    "ESTIMATORS",
    "REGISTRY",
    "Estimator",
    "Terms",
    "refusal",
    "register",
]


@dataclass(frozen=True)
class Terms:
    """What every estimator reads of one policy on the logged data (``helpdp.ope``):
    ``terms``: per quantity, the per-episode terms of :func:`helpdp._src.ope.episode_terms`
    (``is, pdis, dr, dm, w``); ``rho_pad``, ``pads`` (per quantity ``(v0, d_pad)``): the
    padded arrays of the weighted DR; ``names``: the quantities; ``dist``: the target's
    action distribution per step; ``target``: what ``helpdp.ope._target`` gave (passed
    back to skip recomputing it)."""

    terms: dict
    rho_pad: np.ndarray
    pads: dict
    names: list
    dist: np.ndarray
    target: tuple


#: an estimator's function (module docstring)
PerTask = Callable[[Terms, str, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: ``per_task`` (module docstring); ``model_based``: its
    value has a model part (the DM estimate) and a data part, and the task jackknife
    refits its control variate; ``refusal``: why ``helpdp.select`` does not offer it
    (its coverage check's outcome, docs/ope.md's table; empty: the generic line)."""

    name: str
    per_task: PerTask
    model_based: bool = False
    refusal: str = ""


#: name -> estimator, in the order ``helpdp.ope`` reports them
REGISTRY: dict[str, Estimator] = {}


def register(name: str, per_task: PerTask, *, model_based: bool = False, refusal: str = ""):
    """Add an estimator to :data:`REGISTRY` (``helpdp.ope.estimate`` computes it from
    then on; ``helpdp.select`` refuses it until it is in :data:`COVERAGE_CHECKED`)."""
    if name in REGISTRY:
        raise ValueError(f"estimator {name!r} is already registered")
    REGISTRY[name] = Estimator(name, per_task, model_based, refusal)
    return REGISTRY[name]


def _mean_of(key: str) -> PerTask:
    """The per-task mean of the episodes' ``key`` term (``is``, ``pdis``, ``dr``, ``dm``)."""

    def per_task(tm: Terms, name: str, counts, g, task) -> np.ndarray:
        return ((counts * tm.terms[name][key]) @ g) / (counts @ g)

    per_task.__name__ = f"mean_of_{key}"
    return per_task


def _snis(tm: Terms, name: str, counts, g, task) -> np.ndarray:
    """Self-normalised IS: NaN for a task without an agreeing episode."""
    den = (counts * tm.terms["SR"]["w"]) @ g
    num = (counts * tm.terms[name]["is"]) @ g
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _wdr(tm: Terms, name: str, counts, g, task) -> np.ndarray:
    """Weighted doubly robust: the per-turn self-normalised DR, task by task."""
    v0, d_pad = tm.pads[name]
    order, starts = ko.group_order(task, g.shape[1])
    return ko.weighted_dr_groups(counts, v0, tm.rho_pad, d_pad, order, starts)


_USE = "; use wdr or dr"
register(
    "is",
    _mean_of("is"),
    refusal="trajectory IS: its heavy-tailed weights leave the 95% intervals at 0.69 coverage "
    "(U, dSR) with 3 seeds and 0.81 with 10 on HelpWorld (docs/results/ope.md)" + _USE,
)
register(
    "snis",
    _snis,
    refusal="self-normalised IS is biased upwards where few episodes agree (coverage of SR "
    "0.35 with 3 seeds, 0.57 with 10 on HelpWorld, docs/results/ope.md)" + _USE,
)
register(
    "pdis",
    _mean_of("pdis"),
    refusal="per-decision IS: 95% intervals at 0.62 coverage (dU) with 3 seeds and 0.83 with "
    "10 on HelpWorld (docs/results/ope.md)" + _USE,
)
register("dr", _mean_of("dr"), model_based=True)
register("wdr", _wdr, model_based=True)
register(
    "dm",
    _mean_of("dm"),
    model_based=True,
    refusal="the model alone has no data correction (coverage of SR 0.30 with 3 seeds, 0.36 "
    "with 10 on HelpWorld, docs/results/ope.md)" + _USE,
)

#: the estimators' names (a new one is registered above this line, so ``helpdp.ope`` and
#: ``bench/ope_coverage.py --estimators`` offer it; ``REGISTRY`` holds any registered since)
ESTIMATORS = tuple(REGISTRY)

#: the allow list: the estimators whose 95% intervals were checked to cover (>= 0.90 on
#: HelpWorld, bench/ope_coverage.py), the rows "allowed" of docs/ope.md's coverage table
#: (tests/test_estimator_registry.py compares the two); the only ones ``select`` may use
COVERAGE_CHECKED = ("dr", "wdr")


def refusal(name: str) -> str | None:
    """Why ``helpdp.select`` may not value candidates with ``name`` (None: it may)."""
    if name not in REGISTRY:
        return f"not one of {', '.join(REGISTRY)}"
    if name in COVERAGE_CHECKED:
        return None
    return REGISTRY[name].refusal or (
        "its intervals' coverage is not checked: run bench/ope_coverage.py on it, then add it "
        "to COVERAGE_CHECKED (helpdp/estimators.py) with its row in docs/ope.md's coverage table"
    )
