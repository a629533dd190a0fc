"""Run a budgeted help policy found by ``python -m helpdp.search`` in the environments.

The DP's E[S] is an estimate under the collected model, optimistic where states
were seen once. Collecting fresh episodes in which the expert is called as the
policy says (``python -m collect out=EVAL policy=SEARCH_OUT ...``) measures what
the policy really achieves: compare ``episodes.parquet``'s success rate and expert
calls with ``search.json``'s ``expected_success`` and ``expected_usage``.

Per episode, the more-help policy of a mixture is followed with probability
``weight_more_help`` (drawn from the episode's own seed), else the policy in
``policy.parquet``. A state the policy has no row for (never seen in the data the
DP was solved on) gets nohelp. The state keys must be the ones the DP's dataset
was collected with (``state_key``), so that state ids match.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class HelpPolicy:
    """State id -> action tables of a ``helpdp.search`` output directory."""

    less_help: dict[int, int]
    more_help: dict[int, int] | None
    weight_more_help: float
    search: dict  # the search.json it came from

    @classmethod
    def load(cls, path) -> HelpPolicy:
        path = Path(path)
        try:
            search = json.loads((path / "search.json").read_text())
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path}: no search.json; pass the out= directory of `python -m helpdp.search`"
            ) from None

        def table(name: str) -> dict[int, int]:
            df = pd.read_parquet(path / name, columns=["state_id", "action"])
            return dict(zip(df["state_id"].tolist(), df["action"].astype(int).tolist()))

        mix = search.get("mixture")
        if mix is None:
            return cls(table("policy.parquet"), None, 0.0, search)
        return cls(
            table("policy.parquet"),
            table("policy_more_help.parquet"),
            float(mix["weight_more_help"]),
            search,
        )

    def for_episode(self, rng: np.random.Generator) -> dict[int, int]:
        """The deterministic table this episode follows."""
        if self.more_help is not None and rng.random() < self.weight_more_help:
            return self.more_help
        return self.less_help

    def known(self) -> set[int]:
        """The states the policy has a decision for."""
        return set(self.less_help) | set(self.more_help or ())

    def coverage(self, steps: pd.DataFrame) -> float:
        """Share of the visited decision states (rows of ``steps.parquet``) it knows."""
        if not len(steps):
            return float("nan")
        return float(steps["state_id"].isin(self.known()).mean())

    def summary(self, episodes: pd.DataFrame, steps: pd.DataFrame) -> str:
        """Measured against predicted, from the evaluation's episodes and steps.

        Ends with a warning when fewer than half of the visited decision states are
        known: the rest got nohelp, so the run measures the fallback more than the
        policy (typical causes: another ``state_key``, other worlds or clock, or
        states the collection never reached).
        """
        s = self.search
        n = len(episodes)
        succ = float(episodes["success"].mean()) if n else float("nan")
        calls = float(episodes["expert_calls"].mean()) if n else float("nan")
        half = 1.96 * np.sqrt(max(succ * (1 - succ), 1e-12) / max(n, 1))
        cover = self.coverage(steps)
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
