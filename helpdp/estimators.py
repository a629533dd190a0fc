"""The off-policy estimators of ``helpdp.ope``: one registry, one signature.

Each estimator is a function ``per_task(terms, quantity, counts, g, task) -> (B, K)``:
its value of one quantity (``SR``, ``U_<k>``) per task under each replicate of
``counts`` (``(B, n_episodes)``: how often each episode is drawn; ``g``
``(n_episodes, K)``: the episodes' tasks one-hot; ``task`` ``(n_episodes,)``: their
codes), from the :class:`Terms` that ``helpdp.ope`` computes once per policy. It is
registered by name (:func:`register`) in :data:`REGISTRY`, which ``helpdp.ope.estimate``
dispatches on: a registered estimator is computable at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from helpdp._src import ope as ko

__all__ = [
    "ESTIMATORS",
    "REGISTRY",
    "Estimator",
    "Terms",
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
    refits its control variate."""

    name: str
    per_task: PerTask
    model_based: bool = False


#: name -> estimator, in the order ``helpdp.ope`` reports them
REGISTRY: dict[str, Estimator] = {}


def register(name: str, per_task: PerTask, *, model_based: bool = False):
    """Add an estimator to :data:`REGISTRY` (``helpdp.ope.estimate`` computes it from
    then on)."""
    if name in REGISTRY:
        raise ValueError(f"estimator {name!r} is already registered")
    REGISTRY[name] = Estimator(name, per_task, model_based)
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
    val = np.full((counts.shape[0], g.shape[1]), np.nan)
    for j in range(g.shape[1]):
        m = task == j
        val[:, j] = ko.weighted_dr(counts[:, m], v0[m], tm.rho_pad[m], d_pad[m])
    return val


register("is", _mean_of("is"))
register("snis", _snis)
register("pdis", _mean_of("pdis"))
register("dr", _mean_of("dr"), model_based=True)
register("wdr", _wdr, model_based=True)
register("dm", _mean_of("dm"), model_based=True)

#: the shipped estimators' names (``REGISTRY`` holds any registered since)
ESTIMATORS = tuple(REGISTRY)
