"""Turn events (helpdp.events): each turn's class, repeats and loops, on hand-built
steps and on the shipped real-actor data."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpdp.events import (
    TURN_CLASSES,
    args_sha,
    check_events,
    classify_steps,
    classify_turn,
    event_fires,
    state_events,
)

REAL = Path(__file__).resolve().parents[1] / "helpdp" / "data" / "real-actor"


def steps(rows, sha=None):
    df = pd.DataFrame(
        rows, columns=["episode_id", "t", "kind", "tool_name", "failure", "format_error"]
    )
    if sha is not None:
        df["args_sha"] = sha
    return df


def test_each_class_by_hand():
    df = steps(
        [
            (1, 0, "call_tool", "a", None, False),  # working
            (1, 1, "call_tool", "a", "tool_error", False),  # failed, repeat 1
            (1, 2, "call_tool", "a", "invalid_arguments", False),  # failed, repeat 2 (a loop)
            (1, 3, "call_tool", "b", "unknown_tool", False),  # unknown tool, no repeat
            (1, 4, "invalid", None, "invalid_json", True),  # format error, never a repeat
            (1, 5, "invalid", None, "unknown_meta_function", True),
            (1, 6, "invalid", None, "invalid_arguments", False),  # a malformed call: failed
            (1, 7, "list_tools", None, None, False),  # working
            (1, 8, "list_tools", None, None, False),  # repeat 1
            (1, 9, "final", None, None, False),  # stop
        ]
    )
    out = classify_steps(df)
    assert list(out.turn_class) == [
        "working",
        "failed",
        "failed",
        "unknown_tool",
        "format_error",
        "format_error",
        "failed",
        "working",
        "working",
        "stop",
    ]
    assert list(out.repeat) == [False, True, True, False, False, False, False, False, True, False]
    assert list(out.repeats) == [0, 1, 2, 0, 0, 0, 0, 0, 1, 0]
    assert set(out.turn_class) == set(TURN_CLASSES)
    assert (
        classify_turn("invalid") == "format_error"
        and classify_turn("call_tool", None, True) == "format_error"
    )
    # a prompt past the context window ended the episode (collect.rollout): the agent's stop
    assert classify_turn("context_full") == "stop"


def test_args_sha_separates_calls_and_order_and_episodes_do_not_matter():
    a, b = args_sha({"x": 1, "y": [1, 2]}), args_sha({"y": [1, 2], "x": 1})
    assert a == b and len(a) == 16 and a != args_sha({"x": 2, "y": [1, 2]})
    assert args_sha(None) == args_sha({})
    df = steps(
        [
            (5, 0, "call_tool", "a", None, False),
            (5, 1, "call_tool", "a", None, False),  # same tool, other arguments: no repeat
            (5, 2, "call_tool", "a", None, False),  # same arguments as t=1: repeat
            (6, 0, "call_tool", "a", None, False),  # a new episode: never a repeat
            (6, 2, "call_tool", "a", None, False),  # t=1 missing: not a repeat
        ],
        sha=[args_sha({"q": 1}), args_sha({"q": 2}), args_sha({"q": 2}), args_sha({"q": 2}), None],
    )
    out = classify_steps(df.iloc[::-1])  # row order is free and kept
    assert list(out.index) == [4, 3, 2, 1, 0]
    assert list(out.sort_index().repeats) == [0, 0, 1, 0, 0]
    # without args_sha (old data) the same tool again is a repeat
    assert list(classify_steps(df.drop(columns="args_sha")).repeats) == [0, 1, 2, 0, 0]


def test_state_events_shift_by_one_turn():
    df = steps(
        [
            (1, 0, "call_tool", "a", None, False),
            (1, 1, "call_tool", "a", None, False),
            (1, 2, "call_tool", "a", None, False),
            (1, 3, "call_tool", "b", "tool_error", False),
            (1, 4, "final", None, None, False),
        ]
    )
    out = state_events(df)
    assert list(out.last_class) == [None, "working", "working", "working", "failed"]
    assert list(out.last_repeats) == [0, 0, 1, 2, 0]


def test_events_fire():
    kw = dict(depth=3, last_class="failed", repeats=2, context_tokens=900)
    assert event_fires("repeat", **kw) and event_fires("loop", **kw) and event_fires("failed", **kw)
    assert not event_fires("unknown_tool", **kw) and event_fires("turn:3", **kw)
    assert event_fires("context:800", **kw) and not event_fires("context:900", **kw)
    assert not event_fires("context:1", **{**kw, "context_tokens": None})
    assert check_events("repeat,turn:2") == ("repeat", "turn:2")
    with pytest.raises(ValueError, match="unknown event 'loops'"):
        check_events(("loops",))


def test_bad_values_name_the_row():
    df = steps([(1, 0, "call_tool", "a", None, False), (1, 1, "call", "a", None, False)])
    with pytest.raises(ValueError, match="column kind, row 1: 'call'"):
        classify_steps(df)
    df = steps([(1, 0, "call_tool", "a", "boom", False)])
    with pytest.raises(ValueError, match="column failure, row 0: 'boom'"):
        classify_steps(df)
    with pytest.raises(ValueError, match="missing column"):
        classify_steps(df.drop(columns="tool_name"))


def test_real_actor_classes():
    s = pd.read_parquet(REAL / "steps.parquet")
    out = classify_steps(s)
    counts = out.turn_class.value_counts()
    # 717 turns: 150 finals, 93 format errors + 0 other malformed, 135 unknown tools,
    # 44 tool errors + 8 invalid arguments, and the 287 calls that worked
    assert counts.to_dict() == {
        "working": 287,
        "stop": 150,
        "unknown_tool": 135,
        "format_error": 93,
        "failed": 52,
    }
    assert len(out) == 717 and out.turn_class.notna().all()
    loops = (out.repeats >= 2).mean()
    assert 0.05 < loops < 0.25 and out.repeat.mean() > loops
    assert not out.repeat[~out.kind.isin(["call_tool", "list_tools"])].any()
    assert np.array_equal(out.repeats > 0, out.repeat)
