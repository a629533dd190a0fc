"""Run a budgeted help policy found by ``python -m helpdp.search`` in the environments.

The DP's E[S] is an estimate under the collected model, optimistic where states
were seen once. Collecting fresh episodes in which the expert is called as the
policy says (``python -m helpdp.collect out=EVAL policy=SEARCH_OUT ...``) measures what
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

import numpy as np
import pandas as pd

from helpdp.policies import TablePolicy

__all__ = ["coverage", "evaluation_line"]


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
