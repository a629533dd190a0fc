"""PRM-threshold help policies: a trained LM PRM reads a state's text and says when to ask.

The paper's PRM baselines (Sec. 6), deployable on states no data has seen:

* :class:`PRMScorer` maps ``StateView.text`` (the rendering the PRM trained on,
  states.parquet ``text``) to the PRM's ``p(success | s, nohelp)`` and
  ``p(success | s, help)`` (help = intervention 1), batched, cached per text. Its
  per-state scores: ``gain`` (``p_help - p_nohelp``, the predicted gain of help)
  and ``risk`` (``1 - p_nohelp``, low predicted success).
* :func:`state_policy`: help where the score is in the top ``q`` of the
  calibration (validation) states: a :class:`helpdp.policies.ScorePolicy` whose
  threshold is that quantile (q = 10% and 30% in the paper).
* :class:`TaskPolicy`: help on every turn of the episodes whose start state's
  predicted success (``p_nohelp`` at turn 0) is among the lowest ``q`` of the
  calibration tasks' start states ("task-wise").
* The DP's table with the PRM as its fallback for unseen states:
  ``TablePolicy.load(dir, fallback=state_policy(...))``.

:func:`dataset_views` turns a dataset's states into the views a policy is
calibrated on. Only a text-reading PRM (``kind=lm``) can score states it never saw;
importing this module imports neither torch nor the PRM (loading one does).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from helpdp.policies import ScorePolicy, StateView
from prm.base import sigmoid
from prm.load import load_prm

SCORES = ("gain", "risk")

__all__ = ["SCORES", "PRMScorer", "TaskPolicy", "dataset_views", "state_policy"]


def dataset_views(ds, tasks=None, *, start_only: bool = False) -> list[StateView]:
    """A view per non-terminal state of ``ds`` with an observed action (of ``tasks``;
    null: all), in state_id order; ``start_only``: the start states only."""
    st = ds.states
    mdp = ds.mdp
    has = np.diff(mdp.sa_ptr) > 0
    ids_with_rows = set(ds.state_ids[has].tolist())
    keep = ~st["terminal"].to_numpy() & st["state_id"].isin(ids_with_rows).to_numpy()
    if tasks is not None:
        keep &= st["task_id"].isin(list(tasks)).to_numpy()
    if start_only:
        keep &= st["is_start"].to_numpy()
    sub = st[keep].sort_values("state_id")
    return [
        StateView(int(r.state_id), str(r.task_id), int(r.depth), str(r.text))
        for r in sub.itertuples()
    ]


class PRMScorer:
    """``p(success | s, nohelp)`` and ``p(success | s, help)`` of an LM PRM, from text."""

    def __init__(self, prm, *, action: int = 1, batch_size: int | None = None):
        if not hasattr(prm, "encode"):
            raise ValueError(
                f"a {prm.meta.get('kind')!r} PRM cannot read text; PRM policies on unseen "
                "states need kind=lm (prm=minilm, prm=tiny, ...)"
            )
        self.prm = prm
        self.action = int(action)
        self.batch_size = batch_size
        self._cache: dict[str, tuple[float, float]] = {}

    @classmethod
    def load(cls, path, *, device: str = "cpu", **kw) -> PRMScorer:

        return cls(load_prm(path, device=device), **kw)

    @property
    def source(self) -> str:
        return self.prm.source

    def predict(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(p_nohelp, p_help)`` per text (float64)."""

        texts = [str(t) for t in texts]
        new = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if new:
            n = len(new)
            seqs = self.prm.encode(new + new, [0] * n + [self.action] * n)
            p = sigmoid(self.prm.logits_of(seqs, batch_size=self.batch_size))
            for t, p0, p1 in zip(new, p[:n], p[n:], strict=True):
                self._cache[t] = (float(p0), float(p1))
        out = np.array([self._cache[t] for t in texts], np.float64).reshape(-1, 2)
        return out[:, 0], out[:, 1]

    def score(self, views: Sequence[StateView], kind: str = "gain") -> np.ndarray:
        """``gain``: p_help - p_nohelp; ``risk``: 1 - p_nohelp (one per view)."""
        if kind not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {kind!r}")
        p0, p1 = self.predict([v.text for v in views])
        return p1 - p0 if kind == "gain" else 1.0 - p0

    def scorer(self, kind: str = "gain"):
        """``views -> scores`` for :class:`ScorePolicy`."""
        if kind not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {kind!r}")
        return lambda views: self.score(views, kind)


def state_policy(
    scorer: PRMScorer,
    views: Sequence[StateView],
    q: float,
    *,
    kind: str = "gain",
    action: int = 1,
    name: str | None = None,
) -> ScorePolicy:
    """Help where the PRM's ``kind`` score is in the top ``q`` of ``views`` (the
    calibration states): the threshold is the score's ``1 - q`` quantile."""
    label = name or f"prm {kind} top {q:.0%} of states"
    return ScorePolicy.calibrated(scorer.scorer(kind), views, q, action=action, name=label)


class TaskPolicy:
    """Task-wise PRM help: at turn 0 an episode is marked for help when its start
    state's ``p_nohelp`` is at most ``threshold``; it then gets help at every turn.
    :meth:`calibrated` sets ``threshold`` to the ``q`` quantile of the calibration
    start states (the lowest predicted success). An episode first seen after turn
    0 gets nohelp (counted in ``unmarked``)."""

    def __init__(
        self, scorer: PRMScorer, threshold: float, *, action: int = 1, name: str = "prm task-wise"
    ):
        self.scorer = scorer
        self.threshold = float(threshold)
        self.action = int(action)
        self.name = name
        self._marked: dict[tuple[str, int], bool] = {}
        self.unmarked = 0

    @classmethod
    def calibrated(cls, scorer: PRMScorer, start_views: Sequence[StateView], q: float, **kw):
        p0, _ = scorer.predict([v.text for v in start_views])
        if not len(p0):
            raise ValueError("no start states to calibrate the task-wise threshold on")
        kw.setdefault("name", f"prm task-wise lowest {q:.0%} of tasks")
        return cls(scorer, float(np.quantile(p0, q)), **kw)

    def decide(self, views: Sequence[StateView]) -> np.ndarray:
        starts = [v for v in views if v.depth == 0]
        if starts:
            p0, _ = self.scorer.predict([v.text for v in starts])
            for v, p in zip(starts, p0, strict=True):
                self._marked[(v.task_id, v.episode_id)] = bool(p <= self.threshold)
        out = np.zeros(len(views), np.int8)
        for i, v in enumerate(views):
            m = self._marked.get((v.task_id, v.episode_id))
            if m is None:
                self.unmarked += 1
            elif m:
                out[i] = self.action
        return out
