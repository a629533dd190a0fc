"""What every PRM shares: its ``prm.json``, the actor check, save and load.

A PRM directory holds ``prm.json`` (``kind``, ``actor``, ``actions``, the base
model, the training configuration and the task split it was trained with) plus
the kind's own files. ``prm.load.load_prm(dir)`` dispatches on ``kind``; this
module imports none of the kinds (``prm.tabular``, ``prm.lm``), which import it.

One PRM per actor: the success probability of an (agent, state) pair is a
property of the agent that continues from that state, so a PRM trained on one
actor's episodes refuses to score another actor's dataset unless
``allow_other_actor=True``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from helpdp.splits import task_splits

KINDS = ("tabular", "lm")
#: the stages of ``LMPRM.fit``, as its ``stage`` callback names them (``prm.train``'s bar)
FIT_STAGES = ("loss before", "fitting", "loss after")
PRM_JSON = "prm.json"


class ActorMismatchError(ValueError):
    """A PRM asked to score a dataset collected with another actor."""


def dataset_actor(ds) -> str | None:
    """The actor named by the dataset's manifest (``manifest["source"]["actor"]``)."""
    source = ds.manifest.get("source")
    if isinstance(source, dict):
        actor = source.get("actor")
        return None if actor is None else str(actor)
    return None


class PRM:
    """Base class: ``meta`` is the content of ``prm.json``.

    Subclasses set ``kind`` and implement ``_predict_logits(ds, state_ids, actions,
    progress)`` (logits of the checked pairs), ``_save(dir)`` (the kind's own files;
    ``save`` writes ``prm.json``) and the classmethod ``load(dir)`` (which
    ``prm.load.load_prm`` calls).
    """

    kind: str = ""

    def __init__(self, meta: dict):
        self.meta = dict(meta)
        self.meta["kind"] = self.kind

    # --- identity -------------------------------------------------------------
    @property
    def actor(self) -> str | None:
        return self.meta.get("actor")

    @property
    def actions(self) -> list[str]:
        return list(self.meta["actions"])

    @property
    def source(self) -> str:
        """The ``source`` string written to scores.parquet."""
        base = self.meta.get("base_model")
        parts = [f"prm:{self.kind}"] + ([str(base)] if base else []) + [f"actor={self.actor}"]
        return ":".join(parts)

    def check_dataset(self, ds, *, allow_other_actor: bool = False) -> None:
        """Refuse a dataset of another actor, or one whose action names differ."""
        actor = dataset_actor(ds)
        if actor != self.actor and not allow_other_actor:
            raise ActorMismatchError(
                f"this PRM was trained on actor {self.actor!r} but {ds.path} was collected with "
                f"actor {actor!r}; a PRM predicts success of the actor it was trained on "
                "(pass allow_other_actor=true to score anyway)"
            )
        mine, theirs = self.actions, list(ds.actions)
        for k, name in enumerate(theirs):
            if k >= len(mine) or mine[k] != name:
                raise ValueError(
                    f"{ds.path}: action {k} is {name!r} but the PRM was trained with actions {mine}"
                )

    def splits(self, ds) -> pd.Series:
        """``task_id -> split`` for ``ds`` with the split settings the PRM was trained with."""
        sp = self.meta.get("split", {})
        return task_splits(
            ds,
            val_fraction=sp.get("val_fraction", 0.2),
            test_fraction=sp.get("test_fraction", 0.2),
            seed=sp.get("seed", 0),
        )

    # --- prediction -----------------------------------------------------------
    def predict_logits(
        self, ds, state_ids, actions, *, allow_other_actor: bool = False, progress: bool = False
    ) -> np.ndarray:
        """Logit of p(success | state, action) for each pair (float64)."""
        state_ids, actions = self._pairs(ds, state_ids, actions, allow_other_actor)
        if len(state_ids) == 0:
            return np.zeros(0)
        return np.asarray(
            self._predict_logits(ds, state_ids, actions, progress=progress), np.float64
        )

    def _pairs(self, ds, state_ids, actions, allow_other_actor: bool):
        """Check the dataset's actor and the actions; (state_ids, actions) as int64 arrays."""
        self.check_dataset(ds, allow_other_actor=allow_other_actor)
        state_ids = np.asarray(state_ids, np.int64)
        actions = np.broadcast_to(np.asarray(actions, np.int64), state_ids.shape)
        bad = (actions < 0) | (actions >= len(self.actions))
        if bad.any():
            raise ValueError(
                f"action {int(actions[np.argmax(bad)])} is not one of the PRM's actions {self.actions}"
            )
        return state_ids, actions

    def predict(
        self, ds, state_ids, actions, *, allow_other_actor: bool = False, progress: bool = False
    ) -> np.ndarray:
        """p(success | state, action) in [0, 1] for each pair (float64)."""
        z = self.predict_logits(
            ds, state_ids, actions, allow_other_actor=allow_other_actor, progress=progress
        )
        return sigmoid(z)

    def _predict_logits(
        self, ds, state_ids: np.ndarray, actions: np.ndarray, progress: bool = False
    ) -> np.ndarray:
        raise NotImplementedError

    # --- persistence ----------------------------------------------------------
    def save(self, out) -> Path:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self._save(out)
        (out / PRM_JSON).write_text(
            json.dumps(self.meta, indent=2, sort_keys=True, default=str) + "\n"
        )
        return out

    def _save(self, out: Path) -> None:
        raise NotImplementedError


def sigmoid(z) -> np.ndarray:
    z = np.asarray(z, np.float64)
    return np.where(
        z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z)))
    )


def logit(p, eps: float = 1e-6) -> np.ndarray:
    p = np.clip(np.asarray(p, np.float64), eps, 1.0 - eps)
    return np.log(p) - np.log1p(-p)


def read_meta(path) -> dict:
    path = Path(path)
    file = path / PRM_JSON
    if not file.exists():
        raise FileNotFoundError(
            f"{path}: not a PRM directory (no {PRM_JSON}); train one with `python -m prm.train`"
        )
    meta = json.loads(file.read_text())
    if meta.get("kind") not in KINDS:
        raise ValueError(f"{file}: kind must be one of {KINDS}, got {meta.get('kind')!r}")
    return meta
