"""Training and evaluation examples for a PRM, built from a collected dataset.

Labels are Monte-Carlo labels in the style of Math-Shepherd: every step an
episode takes, from state ``s`` with action ``a``, is labelled with that
episode's eventual success. Repeated visits are *not* repeated examples: all
visits of ``(s, a)`` become ONE example whose soft label is the success rate
``k / n`` (``k`` successes among the ``n`` visits) and whose weight grows with
``n`` but saturates (see ``example_weights``). A state seen 40 times is one state
whose label we know precisely, not 40 independent pieces of evidence about how
text maps to success: with count weights the start state of every task (visited
by every episode) and a few early states would dominate the loss, and a model
would mostly learn per-task base rates.

Evaluation uses the visits themselves (``eval_rows``): each (s, a) contributes a
positive row of weight ``k`` and a negative row of weight ``n - k``, i.e. every
step of every held-out episode counts once, which is what AUROC, Brier score and
calibration of "will this episode succeed from here" mean.

Splits are by task, so no task leaks between train, validation and test: the
episodes' own ``split`` column when the dataset has one, else a deterministic
hash of ``task_id`` (``hash_split``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

LABEL_SOURCES = ("auto", "episodes", "dp")
WEIGHTINGS = ("saturating", "count", "uniform")


def example_weights(n: np.ndarray, weighting: str = "saturating", n0: float = 1.0) -> np.ndarray:
    """Weight of an example that summarizes ``n`` visits.

    ``saturating`` (default): ``n / (n + n0)``. One visit weighs 1 / (1 + n0), many
    visits approach 1: a precise soft label counts fully, a single noisy 0/1
    outcome counts less, and no state counts more than one state.
    ``count``: ``n`` (the binomial likelihood of all visits; lets frequent states
    dominate). ``uniform``: 1.
    """
    n = np.asarray(n, dtype=np.float64)
    if weighting == "saturating":
        if n0 < 0:
            raise ValueError(f"weight_n0 must be >= 0, got {n0}")
        return n / (n + n0)
    if weighting == "count":
        return n.copy()
    if weighting == "uniform":
        return np.ones_like(n)
    raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")


def episode_outcomes(ds) -> pd.DataFrame:
    """One row per episode of ``steps.parquet``: ``episode_id, success, n_steps``.

    Success is read from the states table: the verifier's verdict on the state the
    episode's last step led to (false when that state is not terminal).
    """
    if ds.steps is None:
        raise ValueError(f"{ds.path}: this needs steps.parquet (one row per step taken)")
    st = ds.steps.sort_values(["episode_id", "t"], kind="stable")
    last = st.groupby("episode_id", sort=True).tail(1)
    idx = ds.index(last["next_state_id"].to_numpy(np.int64))
    succ = ds.states["success"].to_numpy(bool)
    term = ds.states["terminal"].to_numpy(bool)
    # ds.index gives internal indices; map back to rows of the states table
    row_of_internal = _rows_of_internal(ds)
    rows = row_of_internal[idx]
    counts = st.groupby("episode_id", sort=True).size()
    return pd.DataFrame(
        {
            "episode_id": last["episode_id"].to_numpy(np.int64),
            "success": succ[rows] & term[rows],
            "n_steps": counts.to_numpy(np.int64),
        }
    )


def _rows_of_internal(ds) -> np.ndarray:
    """Row of the states table for each internal state index."""
    rows = np.empty(len(ds.state_ids), np.int64)
    rows[ds.index(ds.states["state_id"].to_numpy(np.int64))] = np.arange(len(ds.states))
    return rows


def state_rows(ds, state_ids) -> np.ndarray:
    """Rows of ``ds.states`` for ``state_ids`` (KeyError on an unknown id)."""
    return _rows_of_internal(ds)[ds.index(np.asarray(state_ids, np.int64))]


@dataclass(frozen=True)
class Examples:
    """One row per observed non-terminal (state, action).

    ``frame`` columns: ``state_id`` int64, ``action`` int8, ``task_id``, ``depth``,
    ``split``, ``text``, ``n`` (visits), ``k`` (successful visits; fractional for
    ``label_source="dp"``), ``label`` (= k / n), ``weight``.
    """

    frame: pd.DataFrame
    label_source: str

    def __len__(self) -> int:
        return len(self.frame)

    def select(self, splits) -> Examples:
        splits = [splits] if isinstance(splits, str) else list(splits)
        f = self.frame[self.frame["split"].isin(splits)].reset_index(drop=True)
        return Examples(f, self.label_source)

    def eval_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row index into ``frame``, binary label, weight): one positive row of weight
        k and one negative row of weight n - k per example (rows of weight 0 dropped)."""
        k = self.frame["k"].to_numpy(np.float64)
        n = self.frame["n"].to_numpy(np.float64)
        m = len(k)
        idx = np.r_[np.arange(m), np.arange(m)]
        y = np.r_[np.ones(m), np.zeros(m)]
        w = np.r_[k, n - k]
        keep = w > 0
        return idx[keep], y[keep], w[keep]


def build_examples(
    ds,
    splits: pd.Series,
    *,
    label_source: str = "auto",
    weighting: str = "saturating",
    weight_n0: float = 1.0,
) -> Examples:
    """Monte-Carlo examples for every observed non-terminal (state, action).

    ``label_source``: ``episodes`` counts the visits in ``steps.parquet`` and labels
    each with its episode's success; ``dp`` uses ``behavior_values`` (visits = the
    transition counts, label = the DP's behaviour-policy success probability, equal
    to the Monte-Carlo rate on tree-shaped data); ``auto`` is ``episodes`` when the
    dataset has steps, else ``dp``.
    """
    if label_source not in LABEL_SOURCES:
        raise ValueError(f"label_source must be one of {LABEL_SOURCES}, got {label_source!r}")
    if label_source == "auto":
        label_source = "episodes" if ds.steps is not None else "dp"
    if label_source == "episodes":
        outcome = episode_outcomes(ds)
        st = ds.steps[["episode_id", "state_id", "action"]]
        succ = pd.Series(outcome["success"].to_numpy(), index=outcome["episode_id"].to_numpy())
        ok = succ.reindex(st["episode_id"].to_numpy()).to_numpy(dtype=np.float64)
        g = (
            pd.DataFrame(
                {
                    "state_id": st["state_id"].to_numpy(np.int64),
                    "action": st["action"].to_numpy(np.int64),
                    "ok": ok,
                }
            )
            .groupby(["state_id", "action"], sort=True)["ok"]
            .agg(["size", "sum"])
            .reset_index()
        )
        frame = pd.DataFrame(
            {
                "state_id": g["state_id"].to_numpy(np.int64),
                "action": g["action"].to_numpy(np.int8),
                "n": g["size"].to_numpy(np.float64),
                "k": g["sum"].to_numpy(np.float64),
            }
        )
    else:
        from helpdp import behavior_values

        bv = behavior_values(ds)
        n = bv["count"].to_numpy(np.float64)
        frame = pd.DataFrame(
            {
                "state_id": bv["state_id"].to_numpy(np.int64),
                "action": bv["action"].to_numpy(np.int8),
                "n": n,
                "k": n * bv["p_success"].to_numpy(np.float64),
            }
        ).sort_values(["state_id", "action"], ignore_index=True)
    rows = state_rows(ds, frame["state_id"].to_numpy())
    states = ds.states
    terminal = states["terminal"].to_numpy(bool)[rows]
    if terminal.any():
        sid = int(frame["state_id"].to_numpy()[np.argmax(terminal)])
        raise ValueError(f"{ds.path}: steps.parquet takes a step from terminal state {sid}")
    task = states["task_id"].astype(str).to_numpy()[rows]
    split = splits.reindex(task).to_numpy()
    frame["task_id"] = task
    frame["depth"] = states["depth"].to_numpy(np.int64)[rows]
    frame["split"] = split
    frame["text"] = states["text"].astype(str).to_numpy()[rows]
    frame["label"] = frame["k"] / frame["n"]
    frame["weight"] = example_weights(frame["n"].to_numpy(), weighting, weight_n0)
    cols = ["state_id", "action", "task_id", "depth", "split", "text", "n", "k", "label", "weight"]
    return Examples(frame[cols].reset_index(drop=True), label_source)


def observed_pairs(ds) -> pd.DataFrame:
    """Every observed (state_id, action) of transitions.parquet, sorted (non-terminal
    by the contract): the rows a ``scores.parquet`` must cover."""
    tr = ds.transitions[["state_id", "action"]].drop_duplicates()
    tr = tr.sort_values(["state_id", "action"], ignore_index=True)
    return pd.DataFrame(
        {"state_id": tr["state_id"].to_numpy(np.int64), "action": tr["action"].to_numpy(np.int8)}
    )
