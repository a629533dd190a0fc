"""Run a budgeted help policy found by ``python -m helpdp.search`` in the environments.

The DP's E[S] is an estimate under the collected model, optimistic where states
were seen once. Collecting fresh episodes in which the expert is called as the
policy says (``python -m collect out=EVAL policy=SEARCH_OUT ...``) measures what
the policy really achieves: :func:`evaluation_line` compares ``episodes.parquet``'s
success rate and expert calls with ``search.json``'s ``expected_success`` and
``expected_usage``, and says how many decisions the policy knew (coverage).

The policy is :class:`helpdp.policies.TablePolicy`: per episode, the more-help
policy of a mixture is followed with probability ``weight_more_help``, else the
policy in ``policy.parquet``; a state it has no row for (never seen in the data
the DP was solved on) gets nohelp. The state keys must be the ones the DP's
dataset was collected with (``state_key``), and so must the worlds and their
clock, so that state ids match.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from helpdp.intervals import wilson
from helpdp.policies import HelpPolicy, TablePolicy, build_policy
from helpdp.select import MixturePolicy, load_policy

__all__ = ["candidate_rates", "coverage", "evaluation_line", "load_help_policy"]


def _load_one(path: str, seed: int) -> HelpPolicy:
    try:
        return build_policy(path, seed=seed, load_json=load_policy)
    except ValueError:
        raise FileNotFoundError(
            f"policy={path}: neither the out= of python -m helpdp.search (search.json), a "
            "selected.json of python -m helpdp.select (or its directory), nor a policy name "
            "(helpdp.policies.build_policy: turn0, turns:0,2, turn0+after:repeat, random:0.3, ...)"
        ) from None


def load_help_policy(spec, *, seed: int = 0) -> HelpPolicy:
    """The policy of ``python -m collect policy=...``: a name of
    :func:`helpdp.policies.build_policy` (``turn0``, ``turn0+after:repeat``, ...), a search
    output (a :class:`TablePolicy`), a ``selected.json`` (or its directory), or a list of them:
    **the candidates design**, each episode running one candidate drawn uniformly by its
    episode id (a :class:`MixturePolicy`), so that each candidate is measured on its own
    episodes (:func:`candidate_rates`)."""
    if isinstance(spec, (str, Path)):
        return _load_one(str(spec), seed)
    paths = [str(x) for x in spec]
    if len(paths) < 2:
        raise ValueError(f"policy: a list of candidates names at least two, got {paths}")
    pols = [_load_one(x, seed) for x in paths]
    names = ", ".join(p.name for p in pols)
    return MixturePolicy(
        [(1.0 / len(pols), p) for p in pols], seed=seed, name=f"candidates: {names}"
    )


def candidate_rates(policy: MixturePolicy, episodes: pd.DataFrame, z: float = 1.96) -> pd.DataFrame:
    """Per candidate of a candidates-design collection: its episodes (by the draw the
    collection made, a function of the episode id), SR with a Wilson interval, and
    calls per episode with a normal interval."""
    pick = np.array([policy._pick(int(e)) for e in episodes["episode_id"]])
    rows = []
    for k, (_, pol) in enumerate(policy.parts):
        e = episodes[pick == k]
        n = len(e)
        sr = float(e["success"].mean()) if n else float("nan")
        lo, hi = wilson(float(e["success"].sum()), n, z)
        u = e["expert_calls"].astype(float)
        u_half = z * float(u.std(ddof=1)) / np.sqrt(n) if n > 1 else float("nan")
        rows.append(
            {
                "candidate": pol.name,
                "episodes": n,
                "SR": sr,
                "SR_lo": lo,
                "SR_hi": hi,
                "U": float(u.mean()) if n else float("nan"),
                "U_ci": u_half,
            }
        )
    return pd.DataFrame(rows)


def coverage(policy: TablePolicy, steps: pd.DataFrame) -> float:
    """Share of the visited decision states (rows of ``steps.parquet``) the policy knows."""
    if not len(steps):
        return float("nan")
    return float(steps["state_id"].isin(policy.known()).mean())


def evaluation_line(policy: TablePolicy, episodes: pd.DataFrame, steps: pd.DataFrame) -> str:
    """Measured against predicted, from the evaluation's episodes and steps.

    Ends with a warning when fewer than half of the visited decision states are
    known: the rest got nohelp, so the run measures the fallback more than the
    policy (typical causes: another ``state_key``, other worlds or clock, or
    states the collection never reached).
    """
    s = policy.search
    n = len(episodes)
    succ = float(episodes["success"].mean()) if n else float("nan")
    calls = float(episodes["expert_calls"].mean()) if n else float("nan")
    half = 1.96 * np.sqrt(max(succ * (1 - succ), 1e-12) / max(n, 1))
    cover = coverage(policy, steps)
    line = (
        f"policy evaluation over {n} episodes: success {succ:.3f} ± {half:.3f} (95%) vs "
        f"E[S] {s['expected_success']:.3f} predicted; expert calls {calls:.3f} per episode "
        f"vs E[U] {s['expected_usage']:.3f} (budget {s['budget']}); coverage {cover:.1%} "
        "of visited decision states"
    )
    if not cover >= 0.5:
        line += (
            f"\nwarning: the policy knows only {cover:.1%} of the decision states visited; "
            "unseen states get the fallback (nohelp). Check that the evaluation uses the "
            "state_key, worlds and clock the policy's data was collected with"
        )
    return line
