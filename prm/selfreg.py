"""Self-regulation with a PRM (paper Sec. 4.2 and 4.3).

Episode success prediction (Sec. 4.2, Table 1): an episode's failure score is
``max_t (1 - p_nohelp(s_t))`` over the states ``s_t`` it acted from, i.e. every
state before its final transition (the terminal state, which reveals the
outcome, is excluded). The episode is predicted to succeed iff its failure score
is at most a threshold. The threshold maximises accuracy on the validation
tasks; accuracy, precision and recall (success = positive class) are reported on
the test tasks.

PRM thresholding (Sec. 4.3): ``PRMThresholdPolicy`` asks for help at the given
share of the hardest states (lowest p_nohelp) and not elsewhere; a plain
``state_id -> action`` table for a later evaluation.

``python -m prm.selfreg data=DIR prm_dir=PRMDIR [out=DIR]`` prints the metrics and a
JSON object on its last line; with ``out`` it also writes one
``prm_threshold_<percent>.parquet`` per fraction.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpdp import load_dataset
from helpdp.cliconf import as_config, run_app
from prm.config import SelfRegConfig
from prm.data import episode_outcomes, observed_pairs, state_rows
from prm.load import load_prm
from prm.report import _clean


def nohelp_scores(
    prm, ds, state_ids=None, *, allow_other_actor: bool = False, progress: bool = False
) -> pd.Series:
    """p_nohelp per state (``state_id`` index): every non-terminal state of ``ds``
    (plus the states steps.parquet acts from) unless ``state_ids`` is given."""
    if state_ids is None:
        state_ids = observed_pairs(ds)["state_id"].to_numpy(np.int64)
        if ds.steps is not None:
            state_ids = np.r_[state_ids, ds.steps["state_id"].to_numpy(np.int64)]
    sids = np.unique(np.asarray(state_ids, np.int64))
    p0 = prm.predict(
        ds,
        sids,
        np.zeros(len(sids), np.int64),
        allow_other_actor=allow_other_actor,
        progress=progress,
    )
    return pd.Series(p0, index=sids, name="p_nohelp")


def episode_failure_scores(
    prm,
    ds,
    *,
    allow_other_actor: bool = False,
    progress: bool = False,
    p_nohelp: pd.Series | None = None,
) -> pd.DataFrame:
    """One row per episode of steps.parquet: ``episode_id, task_id, split, success,
    score`` with ``score = max over the episode's acting states of 1 - p_nohelp``
    (``p_nohelp``: precomputed ``nohelp_scores``, else computed here)."""
    if ds.steps is None:
        raise ValueError(f"{ds.path}: self-regulation needs steps.parquet (the episodes' steps)")
    st = ds.steps
    if p_nohelp is None:
        p_nohelp = nohelp_scores(
            prm,
            ds,
            st["state_id"].to_numpy(np.int64),
            allow_other_actor=allow_other_actor,
            progress=progress,
        )
    fail = 1.0 - p_nohelp
    per_step = pd.DataFrame(
        {
            "episode_id": st["episode_id"].to_numpy(np.int64),
            "fail": fail.reindex(st["state_id"].to_numpy()).to_numpy(),
        }
    )
    score = per_step.groupby("episode_id", sort=True)["fail"].max()
    first = (
        st.sort_values(["episode_id", "t"], kind="stable").groupby("episode_id", sort=True).head(1)
    )
    task = ds.states["task_id"].astype(str).to_numpy()[state_rows(ds, first["state_id"].to_numpy())]
    out = episode_outcomes(ds)
    out["task_id"] = task
    out["split"] = prm.splits(ds).reindex(task).to_numpy()
    out["score"] = score.reindex(out["episode_id"].to_numpy()).to_numpy()
    return out[["episode_id", "task_id", "split", "success", "score"]]


def pick_threshold(score, success) -> float:
    """The threshold theta maximising the accuracy of "success iff score <= theta".

    Candidates are the midpoints between consecutive distinct scores, plus one
    below the lowest (predict every episode fails) and the highest score (predict
    every episode succeeds). Ties go to the lowest theta (the more cautious rule).
    """
    score = np.asarray(score, np.float64)
    success = np.asarray(success, bool)
    if len(score) == 0:
        raise ValueError("no episodes to pick a threshold on")
    u = np.unique(score)
    cands = np.r_[np.nextafter(u[0], -np.inf), (u[:-1] + u[1:]) / 2, u[-1]]
    acc = [np.mean((score <= c) == success) for c in cands]
    return float(cands[int(np.argmax(acc))])


def classification(score, success, theta: float) -> dict:
    """Accuracy, precision and recall of "success iff score <= theta" (success = 1)."""
    pred = np.asarray(score, np.float64) <= theta
    y = np.asarray(success, bool)
    tp = int((pred & y).sum())
    return {
        "accuracy": float(np.mean(pred == y)) if len(y) else float("nan"),
        "precision": tp / int(pred.sum()) if pred.any() else float("nan"),
        "recall": tp / int(y.sum()) if y.any() else float("nan"),
        "episodes": int(len(y)),
        "success_rate": float(y.mean()) if len(y) else float("nan"),
    }


@dataclass(frozen=True)
class PRMThresholdPolicy:
    """Intervene at the ``fraction`` hardest states by PRM (paper Sec. 4.3).

    ``action[i]`` is the action at ``state_ids[i]``: ``help_action`` at the
    ``round(fraction * n)`` states with the lowest ``p_nohelp`` (ties broken by
    state_id), ``0`` (nohelp) elsewhere. ``threshold`` is the largest p_nohelp that
    gets help. ``observed[i]`` says whether that action was observed at the state
    in the data (an offline evaluation can only follow observed actions).
    """

    state_ids: np.ndarray
    action: np.ndarray
    p_nohelp: np.ndarray
    observed: np.ndarray
    fraction: float
    threshold: float
    help_action: int = 1

    @classmethod
    def from_scores(
        cls, state_ids, p_nohelp, fraction: float, *, help_action: int = 1, observed_pairs=None
    ):
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction must be in [0, 1], got {fraction}")
        state_ids = np.asarray(state_ids, np.int64)
        p = np.asarray(p_nohelp, np.float64)
        order = np.lexsort((state_ids, p))
        n_help = int(round(fraction * len(p)))
        action = np.zeros(len(p), np.int8)
        action[order[:n_help]] = help_action
        threshold = float(p[order[n_help - 1]]) if n_help else float("-inf")
        if observed_pairs is None:
            observed = np.ones(len(p), bool)
        else:
            keys = set(
                zip(
                    observed_pairs["state_id"].tolist(),
                    observed_pairs["action"].tolist(),
                    strict=True,
                )
            )
            observed = np.array(
                [(s, a) in keys for s, a in zip(state_ids.tolist(), action.tolist(), strict=True)]
            )
        return cls(state_ids, action, p, observed, float(fraction), threshold, int(help_action))

    @classmethod
    def from_prm(
        cls,
        prm,
        ds,
        fraction: float,
        *,
        help_action: int = 1,
        allow_other_actor: bool = False,
        p_nohelp=None,
    ):
        """Rank every non-terminal state of ``ds`` (those with an observed action) by
        the PRM's p_nohelp (``p_nohelp``: precomputed ``nohelp_scores``)."""
        pairs = observed_pairs(ds)
        sids = np.unique(pairs["state_id"].to_numpy(np.int64))
        if p_nohelp is None:
            p_nohelp = nohelp_scores(prm, ds, sids, allow_other_actor=allow_other_actor)
        p0 = p_nohelp.reindex(sids).to_numpy(np.float64)
        return cls.from_scores(sids, p0, fraction, help_action=help_action, observed_pairs=pairs)

    def __call__(self, state_ids) -> np.ndarray:
        """Actions at ``state_ids`` (KeyError on a state the policy does not cover)."""
        s = pd.Series(self.action, index=self.state_ids)
        ids = np.asarray(state_ids, np.int64)
        missing = ~np.isin(ids, self.state_ids)
        if missing.any():
            raise KeyError(f"state_id {int(ids[np.argmax(missing)])} is not covered by this policy")
        return s.reindex(ids).to_numpy(np.int8)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "state_id": self.state_ids,
                "action": self.action,
                "p_nohelp": self.p_nohelp,
                "observed": self.observed,
            }
        )


def selfreg(cfg) -> dict:
    """Episode-success prediction on the test tasks (threshold from validation) and
    the PRM-thresholding policies; returns the JSON object printed last."""

    cfg = as_config(SelfRegConfig, cfg)
    ds = load_dataset(cfg.data)
    prm = load_prm(cfg.prm_dir, device=cfg.device)
    if ds.steps is None:
        raise ValueError(f"{cfg.data}: self-regulation needs steps.parquet (the episodes' steps)")
    p0 = nohelp_scores(prm, ds, allow_other_actor=cfg.allow_other_actor, progress=cfg.progress)
    eps = episode_failure_scores(prm, ds, p_nohelp=p0)
    val = eps[eps["split"] == "validation"]
    if len(val) == 0:
        raise ValueError(f"{cfg.data}: no validation episodes to pick the threshold on")
    theta = pick_threshold(val["score"], val["success"])
    result = {"threshold": theta}
    for s in ("validation", "test"):
        part = eps[eps["split"] == s]
        result[s] = classification(part["score"], part["success"], theta)
        if len(part):
            majority = bool(part["success"].mean() >= 0.5)
            result[s]["majority_accuracy"] = float(np.mean(part["success"].to_numpy() == majority))
    policies = {}
    for frac in cfg.fractions:
        pol = PRMThresholdPolicy.from_prm(prm, ds, float(frac), p_nohelp=p0)
        name = f"prm_threshold_{round(100 * frac)}"
        policies[name] = {
            "fraction": pol.fraction,
            "threshold": pol.threshold,
            "help_states": int((pol.action != 0).sum()),
            "help_unobserved": int(((pol.action != 0) & ~pol.observed).sum()),
        }
        if cfg.out:
            path = Path(cfg.out) / f"{name}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pol.to_frame().to_parquet(path, index=False)
            policies[name]["path"] = str(path)
    result["policies"] = policies
    print(
        f"self-regulation with {prm.source} on {cfg.data}: success iff max(1 - p_nohelp) <= {theta:.4f}"
    )
    for s in ("validation", "test"):
        r = result[s]
        print(
            f"{s:<11} accuracy {r['accuracy']:.4f} precision {r['precision']:.4f} recall {r['recall']:.4f} "
            f"(majority {r.get('majority_accuracy', float('nan')):.4f}, {r['episodes']} episodes)"
        )
    for name, pol in policies.items():
        print(f"{name}: help at {pol['help_states']} states (p_nohelp <= {pol['threshold']:.4f})")

    out = _clean(result)
    print(json.dumps(out))
    return out


def main() -> None:
    """Command line: ``key=value`` overrides of conf/prm_selfreg.yaml (fields: --help)."""
    run_app("prm.selfreg", SelfRegConfig, selfreg, config_name="prm_selfreg")


if __name__ == "__main__":
    sys.exit(main())
