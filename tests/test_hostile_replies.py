"""A model's reply is data (issue #45, class 9): a reply that no parser or hash expects
(a lone surrogate in a final answer, a tool call nested 100,000 deep) is a classified
format error or an ordinary state, never an exception that stops the collection."""

from __future__ import annotations

import pandas as pd
from collector_helpers import small_args, table_bytes_of

import collect.worker as worker_mod
from collect.actors import SimulatedActor
from collect.awm.protocol import Failure, format_call_tool, parse_turn
from collect.cli import run_cli
from collect.config import collect_config
from collect.statekey import make_keys
from collect.types import TurnReply

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


# -- end to end: hostile replies through `python -m collect`'s plain function -----------
# 2 tasks x 2 probabilities (0.0, 1.0) x 2 seeds = 8 episodes (collector_helpers.SMALL);
# five get a hostile first turn (HOSTILE), three are the simulated actor's throughout
#: 4,000 characters: the app takes them (200,000 it answers with a server error)
STRING_DEPTH = 2_000


def _deep_string_call(view) -> str:
    """The task's first reference call, an argument a string holding JSON nested
    :data:`STRING_DEPTH` deep: the call works, and the oracle compares it with the
    reference call at the next turn (json.loads and a recursive compare both give up
    past ~1,000 levels)."""
    call = view.solution.calls[0]
    args = dict(call.get("arguments") or {})
    args[next(iter(args), "x")] = "[" * STRING_DEPTH + "]" * STRING_DEPTH
    return format_call_tool(call["tool_name"], args)


#: a call_tool whose tool name and argument are JSON escapes of lone surrogates
ESCAPED = (
    '<tool_call>{"name": "call_tool", "arguments": '
    '{"tool_name": "\\ud800", "arguments": {"q": "\\udc00"}}}</tool_call>'
)
#: (seed, task index, trigger probability) -> the episode's first reply
HOSTILE = {
    (0, 0, 0.0): lambda view: TurnReply(SURROGATE, 1, 1),
    (0, 0, 1.0): lambda view: TurnReply(DEEP, 1, 1),
    (0, 1, 1.0): lambda view: TurnReply(_deep_string_call(view), 1, 1),
    (0, 1, 0.0): lambda view: TurnReply(ESCAPED, 1, 1),
    (1, 0, 0.0): lambda view: TurnReply("", error="the endpoint said: \ud800"),
}


class _Hostile:
    """The simulated actor, except that the episodes of :data:`HOSTILE` get its reply as
    their first turn."""

    name = "simulated"
    needs_solutions = True

    def __init__(self):
        self.inner = SimulatedActor()
        self.hostile: dict[tuple[int, int, float], int] = {}  # -> the episode id that got it

    def generate(self, requests):
        replies = self.inner.generate(requests)
        for i, req in enumerate(requests):
            spec = req.view.spec
            key = (spec.seed, spec.task_idx, spec.trigger_p[0])
            if key in HOSTILE and req.view.turn == 0:
                replies[i] = HOSTILE[key](req.view)
                self.hostile[key] = int(spec.episode_id)
        return replies

    def close(self):
        pass


def _collect(out, work, monkeypatch, actor=None):
    """The small collection through ``collect.cli.run_cli`` (what ``python -m collect``
    runs), the worker's actor replaced by ``actor`` (None: the plain simulated actor)."""
    if actor is not None:
        monkeypatch.setattr(worker_mod, "build_actor", lambda config: actor)
    try:
        return run_cli(collect_config(small_args(out, work, "schedule.seeds=[0,1]")))
    finally:
        monkeypatch.undo()


def test_hostile_replies_end_only_their_episodes_and_the_collection_publishes(
    tmp_path, monkeypatch
):
    work = tmp_path / "work"
    actor = _Hostile()
    result = _collect(tmp_path / "hostile", work, monkeypatch, actor)
    assert result.episodes == 8 and len(actor.hostile) == 5
    episodes = pd.read_parquet(tmp_path / "hostile" / "episodes.parquet").set_index("episode_id")
    steps = pd.read_parquet(tmp_path / "hostile" / "steps.parquet")
    first = steps[steps["t"] == 0].set_index("episode_id").fillna({"failure": "worked"})
    # the surrogate answer and the deep call: a format error of that turn ends the episode
    for key in ((0, 0, 0.0), (0, 0, 1.0)):
        ep, step = episodes.loc[actor.hostile[key]], first.loc[actor.hostile[key]]
        assert (ep["outcome"], ep["end_reason"], ep["error"]) == ("format_error",) * 2 + ("",)
        assert ep["format_errors"] == 1 and ep["errors"] == 1 and ep["steps"] == 1
        assert step["format_error"] and step["kind"] == "invalid"
        assert step["failure"] == "invalid_json"
    # a call that parses (its deep string, its escaped surrogates are data): the episode
    # goes on, and no helper or table fails on it
    for key, failure in (((0, 1, 1.0), "worked"), ((0, 1, 0.0), "unknown_tool")):
        ep, step = episodes.loc[actor.hostile[key]], first.loc[actor.hostile[key]]
        assert ep["outcome"] != "server_error" and ep["error"] == "" and ep["steps"] > 1
        assert step["kind"] == "call_tool" and step["failure"] == failure
        assert not step["format_error"]
    # the oracle (p = 1.0) compared the deep string with the reference call, and helped
    deep = steps[steps["episode_id"] == actor.hostile[(0, 1, 1.0)]]
    assert (deep["action"] == 1).all()
    assert first.loc[actor.hostile[(0, 1, 0.0)], "tool_name"] == "\\ud800"
    # an actor's error quoting a lone surrogate: the episode's server error, as it was said
    ep = episodes.loc[actor.hostile[(1, 0, 0.0)]]
    assert (ep["outcome"], ep["error"]) == (
        "server_error",
        "actor failed: the endpoint said: \\ud800",
    )
    states = pd.read_parquet(tmp_path / "hostile" / "states.parquet")
    assert states["text"].str.contains("The answer is \\ud800 done.", regex=False).any()
    # the other episodes are those of a collection without the hostile replies
    _collect(tmp_path / "clean", work, monkeypatch)
    clean_eps = pd.read_parquet(tmp_path / "clean" / "episodes.parquet").set_index("episode_id")
    clean_steps = pd.read_parquet(tmp_path / "clean" / "steps.parquet")
    others = sorted(set(clean_eps.index) - set(actor.hostile.values()))
    assert len(others) == 3 and set(episodes.index) == set(clean_eps.index)
    pd.testing.assert_frame_equal(episodes.loc[others], clean_eps.loc[others])
    mine = steps[steps["episode_id"].isin(others)].reset_index(drop=True)
    theirs = clean_steps[clean_steps["episode_id"].isin(others)].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, theirs)
    # a rerun gives the same tables, byte for byte
    _collect(tmp_path / "again", work, monkeypatch, _Hostile())
    assert table_bytes_of(tmp_path / "again") == table_bytes_of(tmp_path / "hostile")
