"""The helper's state header (helpdp.helper.features): hand-walked values, and a
tiny helper that can learn a help-age rule only when the header is on."""

import numpy as np
import pandas as pd
import pytest
from helper_helpers import TINY as TINY_BASE

from collect.rollout import TextRenderer
from helpdp.helper.features import help_age, helper_input, state_header
from helpdp.policies import StateView

B = TextRenderer.block
TASK = B("user", "Add a room called Sunroom.")
TURN = B("assistant", "Next: create_room.") + B("tool", "Error: HTTP 409")


def test_help_age_and_header_by_hand():
    assert help_age(TASK) is None
    assert help_age(TASK + TURN) is None
    helped = TASK + TURN + B("expert", "the next step is create_room")
    assert help_age(helped) == 0  # the expert spoke; the actor has not acted yet
    assert help_age(helped + TURN) == 1
    assert help_age(helped + TURN + TURN + TURN) == 3
    twice = helped + TURN + B("expert", "again") + TURN + TURN
    assert help_age(twice) == 2  # the latest message counts
    assert state_header(TASK, 0) == "[turn 0 | expert: none in view | expert messages: 0]\n"
    assert state_header(helped + TURN, 2) == "[turn 2 | expert: 1 turn ago | expert messages: 1]\n"
    assert state_header(twice, 5) == "[turn 5 | expert: 2 turns ago | expert messages: 2]\n"
    # a rendering that dropped the expert's message reads as none in view
    cut = TextRenderer(max_tokens=30).render(
        [("user", "Add a room."), ("expert", "x" * 200), *[("assistant", "ok")] * 3]
    )
    assert "omitted" in cut and help_age(cut) is None
    assert helper_input("T", 3, False) == "T"
    assert helper_input("T", 3, True) == state_header("T", 3) + "T"


FILLER = "alpha beta gamma delta epsilon zeta eta theta".split()


def age_world(n_tasks=60, seed=0) -> pd.DataFrame:
    """States whose latest expert message is 1..4 turns old or absent, followed by
    at least 4 filler turns of 24 random words. The DP helps iff the help has worn
    off (age >= 3, or none). With a 48-token window the expert's message is never
    in view: only the header can tell the ages apart."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        split = "train" if t < 0.6 * n_tasks else ("validation" if t < 0.8 * n_tasks else "test")
        for j in range(6):
            age = [None, 1, 2, 3, 4][int(rng.integers(0, 5))]
            turns = [B("assistant", " ".join(rng.choice(FILLER, 24))) for _ in range(8)]
            text = TASK + "".join(turns[:4])
            if age is not None:
                text += B("expert", "call create_room") + "".join(turns[4 : 4 + age])
            label = int(age is None or age >= 3)
            depth = int(rng.integers(4, 12))
            rows.append((t * 10 + j, f"task{t}", split, depth, text, label, 1.0))
    df = pd.DataFrame(
        rows, columns=["state_id", "task_id", "split", "depth", "text", "label", "budget"]
    )
    df["p_nohelp"] = 1.0 - df["label"]
    df["p_expert"] = df["label"].astype(float)
    return df


# the helper tests' tiny BERT, with a window that the texts overflow
TINY = {**TINY_BASE, "vocab_size": 96, "max_length": 48, "head_tokens": 32, "epochs": 15}


def test_the_header_lets_a_tiny_helper_learn_what_its_window_cuts(tmp_path):
    from helpdp.helper.policy import HelperPolicy
    from helpdp.helper.train import examples, train_helper

    df = age_world()
    ex = examples(df, ["nohelp", "expert"], "threshold", header=True)
    assert ex["text"].iloc[0].startswith("[turn ")
    with pytest.raises(ValueError, match="no 'depth' column"):
        examples(df.drop(columns="depth"), ["nohelp", "expert"], "threshold", header=True)
    meta = {"actions": ["nohelp", "expert"], "strategy": "all_states", "rule": "exact"}
    test = df[df["split"] == "test"]
    acc = {}
    for header in (False, True):
        cfg = {
            "helper": TINY,
            "progress": False,
            "calibration": "help_rate",
            "state_header": header,
        }
        res = train_helper(df, meta, cfg, tmp_path / str(header))
        assert res["state_header"] is header
        pol = HelperPolicy(tmp_path / str(header), budget=1.0)
        views = [
            StateView(state_id=int(r.state_id), task_id=r.task_id, depth=int(r.depth), text=r.text)
            for r in test.itertuples()
        ]
        acc[header] = float((pol.decide(views) == test["label"].to_numpy()).mean())
        if header:  # deployment needs the turn, as training had it
            with pytest.raises(ValueError, match="give one depth per text"):
                pol.proba(test["text"].tolist())
            p = pol.proba(test["text"].tolist(), depths=test["depth"].tolist())
            assert p.shape == (len(test), 2)
    majority = max(test["label"].mean(), 1 - test["label"].mean())
    assert acc[False] <= majority + 0.1  # the window shows filler only
    assert acc[True] >= 0.9, acc
