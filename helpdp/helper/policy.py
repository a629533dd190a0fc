"""Deploy a trained helper: ``HelperPolicy(dir, budget=1.0).decide(views)``.

``decide`` takes a batch of ``StateView`` (what a policy may look at in a state)
and returns one action per view (int8: 0 = nohelp, k = intervention k). In
``mode=threshold`` (see ``helpdp.helper.train``) the help score ``1 - P(nohelp)``
is compared with the budget's threshold (interpolated between trained budgets,
clamped outside them; at a score equal to it, help with the budget's
``tie_weight``, drawn per state from ``(seed, episode, turn)``) and, when it
helps, the most likely intervention is taken;
in ``mode=prefix`` the budget is written into the input and the most likely
action is taken (only trained budgets). Inference is batched, under
``torch.no_grad``, on CPU unless told otherwise. Importing this module does not
import torch; loading a helper does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from helpdp.helper.features import budget_prefix, help_probability, helper_input
from helpdp.policies import StateView, uniform


def default_budget(budgets) -> float:
    """The budget a helper decides at when none is given: 1 if trained, else the middle one."""
    budgets = [float(b) for b in budgets]
    return 1.0 if 1.0 in budgets else budgets[len(budgets) // 2]


def budget_threshold(rule: dict, budget: float) -> float:
    """The help-score threshold at ``budget`` of a rule (helper.json, or the config's
    ``helper_decision``): linear between trained budgets, the nearest one's outside."""
    th = {float(k): v for k, v in rule["thresholds"].items()}
    xs = sorted(th)
    return float(np.interp(float(budget), xs, [th[x] for x in xs]))


def budget_tie_weight(rule: dict, budget: float) -> float:
    """The probability of help at a score equal to the threshold (``HelperPolicy.tie_weight``)."""
    b = float(budget)
    tw = {float(k): float(v) for k, v in (rule.get("tie_weights") or {}).items()}
    if not tw:
        return 0.0
    th = {float(k): v for k, v in rule["thresholds"].items()}
    xs = sorted(tw)
    b = min(max(b, xs[0]), xs[-1])
    for lo, hi in zip(xs, xs[1:]):
        if lo <= b <= hi:
            if b in (lo, hi):
                return tw[b]
            if th[lo] == th[hi]:
                return float(np.interp(b, [lo, hi], [tw[lo], tw[hi]]))
            return 0.0
    return tw[xs[0]]


def threshold_actions(p: np.ndarray, threshold: float, tie_weight: float, u) -> np.ndarray:
    """The actions (int8) of class probabilities ``p`` (n, K + 1): help where the draw ``u``
    (one per row, in [0, 1)) is below the help probability of ``1 - P(nohelp)`` at
    ``threshold`` (``tie_weight`` at it), with the most likely intervention."""
    h = help_probability(1.0 - p[:, 0], threshold, tie_weight)
    which = 1 + p[:, 1:].argmax(1)
    return np.where(np.asarray(u) < h, which, 0).astype(np.int8)


class HelperPolicy:
    """A saved helper directory (``python -m helpdp.helper.train``) as a help policy."""

    def __init__(
        self,
        path,
        *,
        budget: float | None = None,
        device: str = "cpu",
        batch_size: int | None = None,
        cpu_threads: int | None = None,
        seed: int = 0,
        threshold: float | None = None,
    ):
        from helpdp.models.encoder import Encoder, load_net

        self.path = Path(path)
        self.seed = int(seed)
        self.meta = json.loads((self.path / "helper.json").read_text())
        if cpu_threads:
            import torch

            torch.set_num_threads(int(cpu_threads))
        self.device = device
        self.net, tok = load_net(self.path, self.meta, device)
        cfg = self.meta["config"]
        self.encoder = Encoder(tok, cfg["max_length"], cfg["head_tokens"])
        self.batch_size = int(batch_size or cfg.get("eval_batch_size", 64))
        self.budgets = [float(b) for b in self.meta["budgets"]]
        self.budget = float(budget) if budget is not None else self._default_budget()
        self.name = f"helper ({cfg.get('backbone', '?')}, budget {self.budget:g})"
        self.fixed_threshold = None
        if threshold is not None:
            self.set_threshold(threshold)

    def set_threshold(self, threshold: float | None) -> None:
        """Decide with this help-score threshold (no tie randomisation) instead of the
        budget's (``None``: the budget's again); ``helpdp.evaluate.calibrate`` searches it."""
        if threshold is not None and self.mode != "threshold":
            raise ValueError("a prefix-mode helper has no thresholds")
        self.fixed_threshold = None if threshold is None else float(threshold)
        cfg = self.meta["config"]
        what = f"budget {self.budget:g}" if threshold is None else f"threshold {threshold:.6g}"
        self.name = f"helper ({cfg.get('backbone', '?')}, {what})"

    @property
    def classes(self) -> list[str]:
        return list(self.meta["classes"])

    @property
    def mode(self) -> str:
        return self.meta["mode"]

    def _default_budget(self) -> float:
        return default_budget(self.budgets)

    def threshold(self, budget: float | None = None) -> float:
        """The help-score threshold at ``budget``: linear between trained budgets,
        the nearest one's outside them (non-increasing in the budget)."""
        if self.mode != "threshold":
            raise ValueError("a prefix-mode helper has no thresholds")
        return budget_threshold(self.meta, self.budget if budget is None else budget)

    def tie_weight(self, budget: float | None = None) -> float:
        """The probability of help at a state whose score equals the threshold (at
        ``SCORE_DECIMALS``): the trained budget's, interpolated between two trained
        budgets that share their threshold, else 0 (between two thresholds ties
        have no mass); the nearest trained budget's outside them."""
        if self.mode != "threshold":
            raise ValueError("a prefix-mode helper has no thresholds")
        return budget_tie_weight(self.meta, self.budget if budget is None else budget)

    @property
    def state_header(self) -> bool:
        """Whether inputs carry ``features.state_header`` (as trained)."""
        return bool(self.meta.get("state_header", False))

    def proba(
        self,
        texts: Sequence[str],
        budget: float | None = None,
        depths: Sequence[int] | None = None,
    ) -> np.ndarray:
        """Class probabilities (n, K + 1) for state texts (and their turns ``depths``,
        needed by a helper trained with ``state_header``)."""
        from helpdp.models.encoder import predict_proba

        texts = list(texts)
        if self.state_header:
            if depths is None or len(depths) != len(texts):
                raise ValueError(
                    f"{self.path}: this helper reads the state's turn (state_header); "
                    "give one depth per text"
                )
            texts = [helper_input(t, d, True) for t, d in zip(texts, depths)]
        if self.mode == "prefix":
            b = self.budget if budget is None else float(budget)
            if not any(abs(b - x) < 1e-9 for x in self.budgets):
                raise ValueError(
                    f"a prefix-mode helper decides only at its trained budgets {self.budgets}, not {b}"
                )
            texts = [budget_prefix(b) + t for t in texts]
        seqs = self.encoder(texts)
        return predict_proba(
            self.net, self.encoder, seqs, batch_size=self.batch_size, device=self.device
        )

    def help_score(self, views: Sequence[StateView]) -> np.ndarray:
        """``1 - P(nohelp)`` per view (threshold mode)."""
        return 1.0 - self.proba([v.text for v in views], depths=[v.depth for v in views])[:, 0]

    def decide(self, views: Sequence[StateView], budget: float | None = None) -> np.ndarray:
        """One action per view (int8), at ``budget`` (default: the policy's)."""
        if len(views) == 0:
            return np.zeros(0, np.int8)
        p = self.proba([v.text for v in views], budget, [v.depth for v in views])
        if self.mode == "prefix":
            return p.argmax(1).astype(np.int8)

        if self.fixed_threshold is not None and budget is None:
            th, tw = self.fixed_threshold, 0.0
        else:
            th, tw = self.threshold(budget), self.tie_weight(budget)
        u = np.array([uniform(self.seed, "helper", v.episode_id, v.depth) for v in views])
        return threshold_actions(p, th, tw, u)
