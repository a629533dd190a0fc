"""The simulated actor's turn model, on synthetic views (no environment): each
weakness it is documented to have, measured over many seeded draws and read back
with the real turn parser."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collect.actors import SimulatedActor, SimulatedConfig, simulate_turn
from collect.awm.protocol import format_call_tool, parse_turn
from collect.rollout import EpisodeView, Help, Turn, TurnRequest, call_matches
from collect.schedule import ScheduleConfig, SplitConfig, build_schedule

N = 3000
CFG = SimulatedConfig()
TOOLS = ["list_items", "get_item", "update_item", "delete_item", "create_order", "list_orders"]


@dataclass
class Solution:
    calls: list
    final_answer: str | None = None


def _calls(n):
    return [
        {"tool_name": "update_item", "arguments": {"item_id": i + 1, "status": "done"}}
        for i in range(n)
    ]


SPEC = build_schedule(
    [("w_1", 0)], 1, ScheduleConfig(probabilities=[0.0], seeds=[0]), SplitConfig()
)[0]


def _done(call, t):
    parsed = {"kind": "call_tool", "tool_name": call["tool_name"], "arguments": call["arguments"]}
    return Turn(t, 0, None, "", parsed, None, "{}")


def _view(n_calls=6, made=0, history=None, help_=None):
    calls = _calls(n_calls)
    hist = list(history) if history is not None else [_done(calls[i], i) for i in range(made)]
    return EpisodeView(SPEC, "do it", TOOLS, Solution(calls), hist, help_), calls


def _turns(view, seed0=0, n=N, config=CFG):
    return [simulate_turn(view, np.random.default_rng(seed0 + i), config) for i in range(n)]


def test_format_errors_fall_with_the_turn_index():
    rates = []
    for made in (0, 3, 6, 9):
        view, _ = _view(n_calls=12, made=made)
        rates.append(np.mean([parse_turn(t).is_format_error for t in _turns(view)]))
    assert rates[0] > rates[1] > rates[2] > rates[3]
    assert abs(rates[0] - CFG.format_error_p) < 0.02
    assert rates[3] < 0.3 * rates[0]


def _wrong_rate(n_calls):
    view, calls = _view(
        n_calls=n_calls, made=0, history=[Turn(0, 0, None, "", {"kind": "list_tools"}, None, "")]
    )
    parsed = [parse_turn(t) for t in _turns(view)]
    calls_made = [p for p in parsed if p.kind == "call_tool"]
    wrong = [not call_matches(p.as_dict(), calls[0]) for p in calls_made]
    return np.mean(wrong)


def test_wrong_tools_and_arguments_grow_with_difficulty():
    easy, hard = _wrong_rate(1), _wrong_rate(12)
    assert 0 < easy < 0.12
    assert hard > 2 * easy and hard > 0.2


def test_stuck_in_loops_after_errors_unless_helped():
    view, calls = _view(n_calls=12)
    failed_text = format_call_tool("get_item", {})
    failed = Turn(
        1, 0, None, failed_text, parse_turn(failed_text).as_dict(), "invalid_arguments", "Error"
    )
    lt = Turn(0, 0, None, "", {"kind": "list_tools"}, None, "")
    view.history[:] = [lt, failed]
    repeats = np.mean([t == failed_text for t in _turns(view)])
    expected = CFG.loop_p + CFG.loop_slope * 1.0
    assert abs(repeats - expected * (1 - CFG.format_error_p * CFG.format_error_decay**2)) < 0.05
    plan = Help("expert", "expert_llm", "Expert help:\n1. call update_item")
    helped, _ = _view(n_calls=12, history=[lt, failed], help_=plan)
    assert np.mean([t == failed_text for t in _turns(helped)]) == 0


def test_recovers_with_an_experts_plan_in_context():
    lt = Turn(0, 0, None, "", {"kind": "list_tools"}, None, "")
    view, calls = _view(n_calls=12, history=[lt])
    alone = [parse_turn(t) for t in _turns(view)]
    plan = Help("expert", "expert_llm", "Expert help:\n1. ...")
    helped_view, _ = _view(n_calls=12, history=[lt], help_=plan)
    helped = [parse_turn(t) for t in _turns(helped_view)]

    def bad(parsed):
        return np.mean(
            [p.kind != "call_tool" or not call_matches(p.as_dict(), calls[0]) for p in parsed]
        )

    assert bad(helped) < 0.5 * bad(alone)
    # the oracle's call is followed
    oracle = Help("oracle", "oracle", "Expert help: ...", call=calls[0])
    told, _ = _view(n_calls=12, history=[lt], help_=oracle)
    followed = np.mean([call_matches(parse_turn(t).as_dict(), calls[0]) for t in _turns(told)])
    assert followed > CFG.follow_p
    # the plan's effect lasts plan_memory turns
    past = Turn(1, 1, plan, "", {"kind": "list_tools"}, None, "")
    later, _ = _view(n_calls=12, history=[lt, past])
    gone, _ = _view(
        n_calls=12,
        history=[lt, past]
        + [
            Turn(i, 0, None, "", {"kind": "list_tools"}, None, "")
            for i in range(2, 2 + CFG.plan_memory)
        ],
    )
    assert bad([parse_turn(t) for t in _turns(later)]) < bad([parse_turn(t) for t in _turns(gone)])


def test_lists_tools_first_and_answers_when_done():
    view, calls = _view(n_calls=3)
    first = [parse_turn(t).kind for t in _turns(view, n=500)]
    assert np.mean([k == "list_tools" for k in first]) > 0.75
    done, _ = _view(n_calls=3, made=3)
    kinds = [parse_turn(t).kind for t in _turns(done, n=500)]
    assert np.mean([k == "final" for k in kinds]) > 0.9


def test_actor_is_seeded_per_episode_and_turn():
    view, _ = _view(n_calls=6, made=2)
    actor = SimulatedActor()
    req = TurnRequest([{"role": "user", "content": "x"}], 0, view)
    a = actor.generate([req, req])
    b = SimulatedActor().generate([req])
    assert a[0].text == a[1].text == b[0].text
    assert a[0].completion_tokens > 0 and a[0].prompt_tokens > 0
    assert actor.generate([TurnRequest([], 0, _view(history=[])[0])])[0].error is None
