"""The simulated agent fitted to the real model: the fit's arithmetic on hand-checkable
tables, the turns it writes read back by the real parser, and (slow) the held-out check
against helpdp/data/real-actor, which the fitted agent passes and the demo's simulated
agent fails."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from collect.actors import FITTED_TABLE, FittedActor, build_actor, load_fitted
from collect.awm.protocol import parse_turn
from collect.fit_simulated import (
    check_rows,
    fit_on_path,
    fit_table,
    heldout_table,
    success_probability,
)
from collect.rollout import EpisodeView, Help, Turn
from collect.schedule import ScheduleConfig, SplitConfig, build_schedule
from collect.simulate import (
    _LIST_TOOLS,
    OUTCOMES,
    FittedAgent,
    history_features,
    simulate_fitted_turn,
    tool_call_text,
)

TOOLS = ["list_items", "get_item", "update_item"]
SPEC = build_schedule(
    [("w_1", 0)], 1, ScheduleConfig(probabilities=[0.0], seeds=[0]), SplitConfig()
)[0]
CALLS = [
    {"tool_name": "get_item", "arguments": {"item_id": 1}},
    {"tool_name": "update_item", "arguments": {"item_id": 1, "status": "done"}},
]


@dataclass
class Solution:
    calls: list
    final_answer: str | None = "done"


def _turns(rows):
    """A turns table (episode, t, helped, outcome, prev, run) as load_turns gives."""
    df = pd.DataFrame(rows, columns=["episode_id", "t", "helped", "outcome", "prev", "run"])
    return df


def test_fit_table_is_the_documented_dirichlet_shrinkage():
    # no help only: at turn 0, 3 format errors and 1 stop; prior 0 gives the raw share
    rows = [(e, 0, False, o, "start", 0) for e, o in enumerate(["format_error"] * 3 + ["stop"])]
    probs = fit_table(_turns(rows), [0, 1], 2, prior=0.0)
    i = OUTCOMES.index
    assert probs["0|0|start|0"][i("format_error")] == pytest.approx(0.75)
    assert probs["0|0|start|0"][i("repeat")] == 0.0  # no previous call at turn 0
    # prior 2: (n_c + 2 * parent_c) / (n + 2); the parent of this cell (help=0, bucket 0,
    # start, run 0) is the (help, bucket, start) row, whose parent is the bucket row, both
    # with the same counts, whose parent is the help row, whose parent is the pooled
    # add-one frequencies (3+1, 1+1, and 1 for the other four) / 10
    pooled = np.array([1, 1, 1, 4, 2, 1]) / 10
    h = (np.array([0, 0, 0, 3, 1, 0]) + 2 * pooled) / 6
    b = h * [1, 1, 1, 1, 1, 0]
    b = (np.array([0, 0, 0, 3, 1, 0]) + 2 * b / b.sum()) / 6
    prev = (np.array([0, 0, 0, 3, 1, 0]) + 2 * b) / 6
    cell = (np.array([0, 0, 0, 3, 1, 0]) + 2 * prev) / 6
    got = fit_table(_turns(rows), [0, 1], 2, prior=2.0)
    assert np.allclose(got["0|0|start|0"], cell)
    # an empty cell is its parent (help=1 never seen: the pooled frequencies, no repeat)
    empty = pooled * [1, 1, 1, 1, 1, 0]
    assert np.allclose(got["1|0|start|0"], empty / empty.sum())


def test_success_probability_by_hand():
    a, b = np.array([1, 1, 1, 2]), np.array([1, 1, 1, 0])
    n = np.array([1, 2, 3, 1])
    got = success_probability(a, b, n, 0.5, 0.5)
    assert np.allclose(got, [0.75, 0.25, 0.0, 0.75])
    assert np.allclose(success_probability(a, b, n, 0.0, 1.0), [1, 0, 0, 0])


def test_fit_on_path_recovers_the_probabilities_that_made_the_data():
    rng = np.random.default_rng(0)
    cells = pd.DataFrame({"n_calls": [1, 2, 1]})
    reps = 2000
    cell = np.repeat(np.arange(3), reps)
    a = rng.integers(0, 3, len(cell))
    b = np.where(cell == 2, 0, rng.integers(0, 4, len(cell)))
    chains = {"a": a, "b": b, "stop": np.ones(len(cell), bool), "cell": cell}
    chains["n"] = cells["n_calls"].to_numpy()[cell]
    p = success_probability(a, b, chains["n"], 0.2, 0.7)
    rate = pd.Series(p).groupby(cell).mean().to_numpy()
    cells["episodes"] = 100000
    cells["successes"] = np.round(rate * 100000)
    q0, q1, _ = fit_on_path(chains, cells, 0.05)
    assert (q0, q1) == (pytest.approx(0.2), pytest.approx(0.7))


def _row(outcome):
    p = np.zeros(len(OUTCOMES))
    p[OUTCOMES.index(outcome)] = 1.0
    return p


def _agent(outcome, on_path=(1.0, 1.0)):
    keys = [
        f"{h}|{b}|{prev}|{r}"
        for h in (0, 1)
        for b in (0, 1)
        for prev in ("start", "working", "failed", "unknown_tool")
        for r in (0, 1, 2)
    ]
    return FittedAgent((0, 1), 2, {k: _row(outcome) for k in keys}, on_path)


def _view(history=(), help_=None):
    return EpisodeView(SPEC, "do it", TOOLS, Solution(CALLS), list(history), help_)


def _turn(t, text):
    a = parse_turn(text)
    failure = a.failure.value if a.failure else None
    if a.kind == "call_tool" and a.tool_name not in TOOLS:
        failure = "unknown_tool"
    return Turn(t, 0, None, text, a.as_dict(), failure, "")


def test_each_outcome_is_written_as_a_turn_of_its_class():
    rng = np.random.default_rng(0)
    view = _view()
    for _ in range(50):
        fe = parse_turn(simulate_fitted_turn(view, rng, _agent("format_error")))
        assert fe.is_format_error and fe.failure.value in ("invalid_json", "unknown_meta_function")
        ut = parse_turn(simulate_fitted_turn(view, rng, _agent("unknown_tool")))
        assert ut.kind == "call_tool" and ut.tool_name not in TOOLS
        failed = parse_turn(simulate_fitted_turn(view, rng, _agent("failed")))
        assert failed.tool_name in TOOLS
        assert all(isinstance(v, dict) for v in failed.arguments.values())  # wrong types
        # working, on path: the next reference call; off path: a call that changes nothing
        on = parse_turn(simulate_fitted_turn(view, rng, _agent("working")))
        assert on.tool_name == "get_item" and on.arguments == {"item_id": 1}
        off = parse_turn(simulate_fitted_turn(view, rng, _agent("working", (0.0, 0.0))))
        assert off.kind == "list_tools" or off.tool_name == "get_item"
    # a stop before the work is done is a premature answer; after it, the reference answer
    assert simulate_fitted_turn(view, rng, _agent("stop")) == "I have completed the task."
    done = [_turn(0, simulate_fitted_turn(view, rng, _agent("working")))]
    done.append(_turn(1, simulate_fitted_turn(_view(done), rng, _agent("working"))))
    assert [t.parsed["tool_name"] for t in done] == ["get_item", "update_item"]
    assert simulate_fitted_turn(_view(done), rng, _agent("stop")) == "done"
    # a repeat is the previous turn's text; with help, a working call follows the advice
    assert simulate_fitted_turn(_view(done[:1]), rng, _agent("repeat")) == done[0].text
    advice = Help("oracle", "oracle", "call", call=CALLS[1])
    helped = parse_turn(simulate_fitted_turn(_view(help_=advice), rng, _agent("working")))
    assert helped.tool_name == "update_item"


def test_outcomes_are_drawn_with_the_rows_probabilities():
    shipped = load_fitted()
    row = shipped.row(False, 0, "start", 0)
    rng = np.random.default_rng(1)
    view = _view()
    n = 4000
    kinds = [parse_turn(simulate_fitted_turn(view, rng, shipped)) for _ in range(n)]
    stop = np.mean([k.kind == "final" for k in kinds])
    fmt = np.mean([k.is_format_error for k in kinds])
    se = lambda p: 4 * np.sqrt(p * (1 - p) / n)  # noqa: E731
    assert abs(stop - row[OUTCOMES.index("stop")]) < se(row[OUTCOMES.index("stop")])
    assert abs(fmt - row[OUTCOMES.index("format_error")]) < se(row[OUTCOMES.index("format_error")])


def test_history_features_count_the_repeat_run():
    a = _turn(0, '<tool_call>\n{"name": "list_tools", "arguments": null}\n</tool_call>')
    b = _turn(1, a.text)
    c = _turn(2, a.text)
    assert history_features([]) == ("start", 0)
    assert history_features([a]) == ("working", 0)
    assert history_features([a, b, c]) == ("working", 2)


def test_a_bad_table_is_refused_naming_the_field(tmp_path):
    data = json.loads(FITTED_TABLE.read_text())
    data["on_path"]["help"] = 1.5
    with pytest.raises(ValueError, match="on_path"):
        FittedAgent.from_json(data)
    bad = tmp_path / "t.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="actor.table"):
        load_fitted(str(bad))


def test_the_preset_builds_the_fitted_actor():
    from collect.collector import collect_config

    cfg = collect_config(["out=/tmp/x", "collect/actor=simulated_real"])
    actor = build_actor(cfg.actor)
    assert isinstance(actor, FittedActor) and actor.name == "simulated_real"
    assert actor.agent.on_path == load_fitted().on_path


def _collect(out, overrides):
    from collect.collector import collect, collect_config

    base = [
        f"out={out}",
        f"env.work_root={out}_work",
        "executor.workers=1",
        "schedule.tasks=[0,1,2,3,4,5,6]",
        "schedule.splits=[train]",
        "progress=false",
    ]
    collect(collect_config(base + overrides))


@pytest.mark.slow
def test_heldout_check_passes_for_the_fit_and_fails_for_the_demo_agent(tmp_path):
    from helpdp import demo_dataset_path

    real = demo_dataset_path().parent / "real-actor"
    _collect(tmp_path / "fit", ["collect/actor=simulated_real", "schedule.seeds=[2,3,4]"])
    table = heldout_table(real, tmp_path / "fit", [2])
    assert check_rows(table) == [], table
    _collect(tmp_path / "demo", ["schedule.seeds=[2]"])
    bad = check_rows(heldout_table(real, tmp_path / "demo", [2]))
    names = " ".join(bad)
    assert "class working" in names and "turn 0 working (no help)" in names


def test_the_shipped_table_is_what_the_fit_command_writes(tmp_path):
    from collect.fit_simulated import FitSimulatedConfig, run_fit

    out = tmp_path / "t.json"
    run_fit(FitSimulatedConfig(out=str(out)))
    assert out.read_text() == FITTED_TABLE.read_text()
    with pytest.raises(ValueError, match="exists"):
        run_fit(FitSimulatedConfig(out=str(out)))


def test_every_outcome_can_be_written_after_the_work_is_done_and_without_calls():
    """Once every reference call is made (the next-call index is past the list), after a
    list_tools turn, and for a task with no reference calls, each outcome still writes a
    turn (21 of 2100 fitted episodes had ended on IndexError as actor failures)."""
    rng = np.random.default_rng(0)
    done = [_turn(i, tool_call_text(c["tool_name"], c["arguments"])) for i, c in enumerate(CALLS)]
    after_list = [*done, _turn(2, _LIST_TOOLS)]
    no_calls = EpisodeView(SPEC, "do it", TOOLS, Solution([]), [], None)
    no_calls_listed = EpisodeView(SPEC, "do it", TOOLS, Solution([]), after_list[2:], None)
    for view in (_view(done), _view(after_list), no_calls, no_calls_listed):
        for outcome in OUTCOMES:
            for on_path in ((1.0, 1.0), (0.0, 0.0)):
                for _ in range(5):
                    text = simulate_fitted_turn(view, rng, _agent(outcome, on_path))
                    assert isinstance(text, str) and text
