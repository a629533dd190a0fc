"""A model's reply is data (issue #45, class 9): a reply that no parser or hash expects
(a lone surrogate in a final answer, a tool call nested 100,000 deep) is a classified
format error or an ordinary state, never an exception that stops the collection."""

from __future__ import annotations

from collect.awm.protocol import Failure, parse_turn
from collect.statekey import make_keys

DEEP = (
    '<tool_call>{"name": "list_tools", "arguments": '
    + "[" * 100_000
    + "]" * 100_000
    + "}</tool_call>"
)
SURROGATE = "The answer is \ud800 done."


def test_a_call_nested_100000_deep_is_a_format_error():
    action = parse_turn(DEEP)
    assert action.kind == "invalid"
    assert action.failure is Failure.INVALID_JSON and action.failure.is_format_error


def test_a_lone_surrogate_hashes_into_a_state_id():
    for name in ("history", "db"):
        keys = make_keys(name)
        _, chain = keys.start("t0", "d")
        element = {"action": {"kind": "final", "answer": SURROGATE}, "observation": SURROGATE}
        sid = keys.terminal(chain, "t0", 1, element, "final", "others", "d")
        assert isinstance(sid, int)
        nxt, _ = keys.step(chain, "t0", 1, element, "d")
        assert isinstance(nxt, int) and nxt != sid
