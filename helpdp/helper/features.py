"""What the helper reads: the state's text, optionally behind a one-line header.

The helper's encoder keeps only the first ``head_tokens`` and the last tokens of a
state's text (``helper.max_length``). On the demo worlds a state's text runs to
~1 000 tokens and a turn's tool call and reply take ~100, so with MiniLM's 256
tokens the latest expert message is inside the window in only 26 / 20 / 15% of
the states one / two / three turns after it (docs/results/README.md, run 4), while the DP's
``db_help`` labels depend on exactly that age. ``state_header`` states, at the
front of the input where the encoder always keeps it, what the full text says but
the window loses: the turn, how many actor turns ago the latest expert message
in the text was, and how many expert messages the text holds.

It is computed from ``(text, depth)`` only, the same way at training (label rows,
states.parquet) and at deployment (``StateView``), so train and deploy inputs are
identical by construction. A text whose rendering dropped its expert message
(``TextRenderer`` keeps the task and the most recent entries) reads "none in
view", as the policy would see it. Pure functions, no I/O.
"""

from __future__ import annotations

import numpy as np

EXPERT_BLOCK = "<|expert|>\n"
ACTOR_BLOCK = "<|assistant|>\n"


def help_age(text: str) -> int | None:
    """Actor turns since the latest expert message in ``text`` (1: the expert spoke
    before the actor's previous turn), or ``None`` when the text holds none.
    0 when the expert's message is the text's last entry (the actor has not yet
    taken its turn)."""
    i = text.rfind(EXPERT_BLOCK)
    if i < 0:
        return None
    return text.count(ACTOR_BLOCK, i)


def state_header(text: str, depth: int) -> str:
    """``"[turn 4 | expert: 2 turns ago | expert messages: 1]\\n"`` for the state at
    turn ``depth`` whose text is ``text``."""
    age = help_age(text)
    n = text.count(EXPERT_BLOCK)
    if age is None:
        seen = "none in view"
    else:
        seen = f"{age} turn{'s' if age != 1 else ''} ago"
    return f"[turn {int(depth)} | expert: {seen} | expert messages: {n}]\n"


def helper_input(text: str, depth: int, header: bool) -> str:
    """The helper's input for a state: its text, behind ``state_header`` if ``header``."""
    return state_header(text, depth) + text if header else text


#: scores are compared at this many decimals, so that states with the same text
#: (the same score up to float noise) form one level of ties
SCORE_DECIMALS = 6


def round_scores(s) -> np.ndarray:
    return np.round(np.asarray(s, np.float64), SCORE_DECIMALS)


def budget_prefix(budget: float) -> str:
    return f"[budget={float(budget):g}] "


def help_probability(score, tau: float, w: float) -> np.ndarray:
    """The thresholded policy's probability of help per state: 1 above ``tau``,
    ``w`` at ``tau`` (the boundary level, randomised state-wise), 0 below;
    NaN scores (no decision there) get 0."""
    s = round_scores(score)
    t = float(np.round(tau, SCORE_DECIMALS))
    h = np.where(s > t, 1.0, np.where(s == t, float(w), 0.0))
    return np.where(np.isnan(s), 0.0, h)
