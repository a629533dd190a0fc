"""The simulated agent on task features: one multinomial logit for every task.

:class:`collect.simulate.FittedAgent` is a table of turn outcomes per cell (help now,
turn bucket, previous class, repeat run) and knows nothing of the task, so it plays its
fit tasks and no other. :class:`FeatureAgent` gives the same outcomes
(:data:`collect.simulate.OUTCOMES`) a probability from the same cell *and* the task: its
reference solution's length and its world's tool count (both on a log scale, centred at
:data:`CALLS0` calls and :data:`TOOLS0` tools), each also crossed with help:

    P(outcome k | x) = exp(x . w_k) / sum_j exp(x . w_j)       (w_working = 0)

with ``repeat`` impossible at turn 0. The weights maximise the likelihood of the real
turns with an L2 penalty ``l2 / 2 * |w|^2`` on every weight but the intercepts (a
Gaussian prior: a cell the data does not hold falls back toward the others, as the
table's Dirichlet prior does). The numeric part here is arrays in, arrays out;
:mod:`collect.fit_simulated` reads the data and writes the JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from collect.simulate import OUTCOMES, FittedAgent
from helpdp.jsonvalue import JSON

__all__ = [
    "CALLS0",
    "TOOLS0",
    "FeatureAgent",
    "agent_from_json",
    "design",
    "feature_names",
    "fit_logit",
    "logit_probs",
]

#: the centres of the task features (log reference calls, log tools)
CALLS0, TOOLS0 = 3.0, 30.0
#: previous-turn classes with a column of their own (``start`` is the baseline)
PREV_COLS = ("working", "failed", "unknown_tool")


def feature_names(n_buckets: int, max_run: int) -> list[str]:
    """The columns of :func:`design`, in order."""
    return [
        "intercept",
        "help",
        *(f"bucket {b}" for b in range(1, n_buckets)),
        *(f"prev {c}" for c in PREV_COLS),
        *(f"run {r}" for r in range(1, max_run + 1)),
        "log calls",
        "log tools",
        "help x log calls",
        "help x log tools",
    ]


def design(
    helped: np.ndarray,
    bucket: np.ndarray,
    prev: np.ndarray,
    run: np.ndarray,
    n_calls: np.ndarray,
    n_tools: np.ndarray,
    n_buckets: int,
    max_run: int,
) -> np.ndarray:
    """The design matrix [turn, feature] (:func:`feature_names`). ``prev`` is the index
    of the previous class in ``("start", *PREV_COLS)``; ``run`` is capped at ``max_run``;
    ``n_calls`` and ``n_tools`` are at least 1."""
    helped = np.asarray(helped, dtype=float)
    n = len(helped)
    bucket, prev = np.asarray(bucket, dtype=int), np.asarray(prev, dtype=int)
    run = np.minimum(np.asarray(run, dtype=int), max_run)
    lc = np.log(np.maximum(np.asarray(n_calls, dtype=float), 1.0) / CALLS0)
    lt = np.log(np.maximum(np.asarray(n_tools, dtype=float), 1.0) / TOOLS0)
    cols = [np.ones(n), helped]
    cols += [(bucket == b).astype(float) for b in range(1, n_buckets)]
    cols += [(prev == i + 1).astype(float) for i in range(len(PREV_COLS))]
    cols += [(run == r).astype(float) for r in range(1, max_run + 1)]
    cols += [lc, lt, helped * lc, helped * lt]
    return np.stack(cols, axis=1)


def _masked_softmax(z: np.ndarray, mask: np.ndarray) -> np.ndarray:
    z = np.where(mask, z, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def logit_probs(weights: np.ndarray, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """P(outcome | x) [turn, outcome]; ``mask`` [turn, outcome] False where an outcome
    cannot happen (a repeat at turn 0)."""
    return _masked_softmax(x @ weights, np.asarray(mask, dtype=bool))


def fit_logit(
    x: np.ndarray, y: np.ndarray, mask: np.ndarray, l2: float, base: int = 0
) -> np.ndarray:
    """The weights [feature, outcome] maximising the masked multinomial likelihood of the
    outcome indices ``y`` minus ``l2 / 2`` times the squared weights (the intercept row
    unpenalised); outcome ``base``'s column is 0. A ``ValueError`` when an observed
    outcome is masked."""
    from scipy.optimize import minimize

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=int)
    mask = np.asarray(mask, dtype=bool)
    n, d = x.shape
    k = mask.shape[1]
    if not mask[np.arange(n), y].all():
        raise ValueError("an observed outcome is masked out")
    free = [j for j in range(k) if j != base]
    onehot = np.zeros((n, k))
    onehot[np.arange(n), y] = 1.0
    penalty = np.full((d, 1), float(l2))
    penalty[0] = 0.0

    def unpack(theta: np.ndarray) -> np.ndarray:
        w = np.zeros((d, k))
        w[:, free] = theta.reshape(d, len(free))
        return w

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w = unpack(theta)
        p = logit_probs(w, x, mask)
        ll = np.log(np.clip(p[np.arange(n), y], 1e-300, None)).sum()
        grad = x.T @ (p - onehot) + penalty * w
        value = -ll + 0.5 * float((penalty * w * w).sum())
        return value, grad[:, free].ravel()

    res = minimize(loss, np.zeros(d * len(free)), jac=True, method="L-BFGS-B")
    return unpack(res.x)


@dataclass(frozen=True)
class FeatureAgent:
    """A fitted logit: P(outcome | help now, turn bucket, previous class, repeat run,
    the task's reference calls and tool count), and the probability that a working call
    is the next reference call (without, with help), as :class:`FittedAgent`'s."""

    buckets: tuple[int, ...]
    max_run: int
    weights: np.ndarray  # [feature, outcome]
    on_path: tuple[float, float]

    @classmethod
    def from_json(cls, data: dict[str, JSON], where: str = "table") -> FeatureAgent:
        """From the JSON of ``collect.fit_simulated model=features``; a bad one is a
        ``ValueError`` naming the field."""
        if list(data.get("outcomes", [])) != list(OUTCOMES):
            raise ValueError(f"{where}: outcomes must be {list(OUTCOMES)}")
        buckets = tuple(int(b) for b in data.get("buckets", []))
        if not buckets or buckets[0] != 0 or list(buckets) != sorted(set(buckets)):
            raise ValueError(f"{where}: buckets must be increasing lower edges from 0")
        max_run = int(data.get("max_run", 2))
        names = feature_names(len(buckets), max_run)
        if list(data.get("features", [])) != names:
            raise ValueError(f"{where}: features must be {names}")
        w = np.asarray(data.get("weights", []), dtype=float)
        if w.shape != (len(names), len(OUTCOMES)) or not np.isfinite(w).all():
            raise ValueError(f"{where}: weights must be finite, {len(names)} x {len(OUTCOMES)}")
        on = data.get("on_path", {})
        q = (float(on.get("nohelp", -1)), float(on.get("help", -1)))
        if not all(0 <= v <= 1 for v in q):
            raise ValueError(f"{where}: on_path.nohelp and on_path.help must be in [0, 1]")
        return cls(buckets, max_run, w, q)

    def probs(
        self,
        helped: Sequence[bool] | np.ndarray,
        turn: Sequence[int] | np.ndarray,
        prev: Sequence[int] | np.ndarray,
        run: Sequence[int] | np.ndarray,
        n_calls: Sequence[int] | np.ndarray,
        n_tools: Sequence[int] | np.ndarray,
    ) -> np.ndarray:
        """[turn, outcome] probabilities (``prev``: index in ``("start", *PREV_COLS)``)."""
        turn = np.asarray(turn, dtype=int)
        bucket = np.searchsorted(self.buckets, turn, side="right") - 1
        x = design(helped, bucket, prev, run, n_calls, n_tools, len(self.buckets), self.max_run)
        return logit_probs(self.weights, x, outcome_mask(np.asarray(prev, dtype=int)))

    def row(
        self, helped: bool, turn: int, prev: str, run: int, *, n_calls: int = 1, n_tools: int = 1
    ) -> np.ndarray:
        """One turn's probabilities over OUTCOMES (``prev``: a class or ``start``)."""
        i = 0 if prev == "start" else 1 + PREV_COLS.index(prev)
        return self.probs([helped], [turn], [i], [run], [n_calls], [n_tools])[0]


def outcome_mask(prev: np.ndarray) -> np.ndarray:
    """[turn, outcome]: every outcome but ``repeat`` after ``start`` (turn 0)."""
    mask = np.ones((len(prev), len(OUTCOMES)), dtype=bool)
    mask[np.asarray(prev) == 0, OUTCOMES.index("repeat")] = False
    return mask


def agent_from_json(data: dict[str, JSON], where: str = "table") -> FittedAgent | FeatureAgent:
    """The agent a ``collect.fit_simulated`` JSON holds: its ``model`` (``table``, the
    default, or ``features``); anything else is a ``ValueError`` naming the file."""
    model = data.get("model", "table")
    if model == "features":
        return FeatureAgent.from_json(data, where)
    if model != "table":
        raise ValueError(f"{where}: model must be table or features, not {model!r}")
    return FittedAgent.from_json(data, where)
