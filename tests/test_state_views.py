"""One home for the state a policy sees (helpdp.views): one scripted episode gives the
same StateViews on the collector's path, the GRPO environment_factory's gate and the
off-policy evaluation's offline views, and an event rule fires at the same states."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from test_collect_rollout import Reset, Solution, Step  # the rollout tests' fake env types

from collect.awm.protocol import format_call_tool, parse_turn
from collect.interventions import InterventionConfig, Oracle
from collect.rollout import RunContext, TextRenderer, TurnReply, episode_tables, run_episodes
from collect.schedule import EpisodeSpec
from collect.statekey import make_keys
from helpdp.data import Dataset
from helpdp.ope import load_logged
from helpdp.policies import build_policy
from helpdp.train.env_factory import AWMEnvironmentFactory
from helpdp.views import view_from_history

SCENARIO = "fake_1"
#: the actor's turns: a working call repeated into a loop, a failing call, a repeat, the end
SCRIPT = [
    ("get_item", {"item_id": 1}),
    ("get_item", {"item_id": 1}),
    ("get_item", {"item_id": 1}),
    ("boom", {}),
    ("update_item", {"item_id": 1, "status": "done"}),
    ("update_item", {"item_id": 1, "status": "done"}),
    None,  # the final answer
]
HELP_AT = 3  # the recording policy calls the expert at this state


@dataclass
class Tool:
    name: str
    description: str = "A tool."
    input_schema: dict = field(default_factory=dict)


@dataclass
class Scenario:
    name: str
    solutions: dict


class World:
    """A scripted world: every call works but ``boom`` (a tool error); text ends it."""

    def __init__(self, scenario):
        self.scenario = scenario
        item = {"type": "object", "properties": {"item_id": {"type": "integer"}}}
        update = {
            "type": "object",
            "properties": {"item_id": {"type": "integer"}, "status": {"type": "string"}},
        }
        self.tools = [Tool("get_item", input_schema=item), Tool("update_item", input_schema=update)]
        self.tools.append(Tool("boom"))
        self.trajectory: list[str] = []

    def reset(self, task_idx, episode_id=None):
        self.trajectory = []
        return Reset("SYSTEM", f"task {task_idx}: update item 1")

    def step(self, text):
        self.trajectory.append(text)
        a = parse_turn(text, expert_enabled=False)
        failure = a.failure.value if a.failure else None
        if a.kind == "call_tool" and a.tool_name == "boom":
            failure = "tool_error"
        info = {"action": a.as_dict(), "failure": failure, "format_error": a.is_format_error}
        if a.kind == "final":
            info.update(outcome="others", valid=True, verification={"mode": "code"})
            return Step("", 0.0, True, info)
        return Step("Error: boom" if failure else '{"ok": true}', None, False, info)

    def trajectory_text(self):
        return "\n".join(self.trajectory)

    def truncate(self):  # pragma: no cover - the script ends before max_turns
        raise AssertionError("not reached")

    def close(self):
        pass


class Pool:
    def __init__(self):
        calls = [{"tool_name": n, "arguments": a} for n, a in (SCRIPT[0], SCRIPT[4])]
        self.sc = Scenario(SCENARIO, {0: Solution(calls)})

    def scenario(self, name):
        return self.sc

    def acquire(self, name):
        return World(self.sc)

    def release(self, env):
        pass


class Actor:
    """Replies with the script's turn at each state (and a token count)."""

    name = "scripted"

    def generate(self, requests):
        out = []
        for req in requests:
            t = len(req.view.history)
            turn = SCRIPT[t]
            text = "All done." if turn is None else format_call_tool(*turn)
            out.append(TurnReply(text, 100 + 10 * t, 7))
        return out


class Recording:
    """Records every view it is shown; calls the expert at state HELP_AT."""

    name = "recording"

    def __init__(self):
        self.views = []

    def decide(self, views):
        self.views.extend(views)
        return np.array([int(v.depth == HELP_AT) for v in views], np.int8)


def _oracle():
    return Oracle("oracle", InterventionConfig(use_verifier=False))


def _collect():
    policy = Recording()
    ctx = RunContext(Pool(), [_oracle()], make_keys("history"), TextRenderer(0), policy=policy)
    spec = EpisodeSpec(0, SCENARIO, 0, f"{SCENARIO}/0", "train", 0, (0.5,), 12345)
    logs = run_episodes([spec], Actor(), ctx)
    return policy.views, logs


def _factory_views():
    policy = Recording()
    f = AWMEnvironmentFactory(
        Pool(), [SCENARIO], interventions=[_oracle()], policy=policy, max_per_episode=2
    )
    env = f.environments()()
    env.reset(scenario=SCENARIO, task_idx=0)
    for turn in SCRIPT:
        env.ask_expert("what now?")  # the gate's view at every state of the episode
        if turn is not None:
            getattr(env, turn[0])(**turn[1])
    env.get_reward()
    return policy.views


def _offline_views(logs):
    tables = {k: v.to_pandas() for k, v in episode_tables(logs, ["oracle"]).items()}
    manifest = {"actions": ["nohelp", "oracle"], "gamma": 1.0, "source": {}}
    ds = Dataset(
        None,
        manifest,
        pd.DataFrame(tables["states"]),
        None,
        None,
        None,
        None,
        episodes=tables["episodes"],
        steps=tables["steps"],
    )
    return load_logged(ds).views()


def _history_only(v):
    """What a path without the collector's state ids and token counts can know."""
    past = tuple((lc, r, None) for lc, r, _ in v.past)
    return dataclasses.replace(v, state_id=0, text="", episode_id=0, context_tokens=None, past=past)


def test_one_episode_gives_the_same_views_on_every_path():
    collected, logs = _collect()
    assert [v.depth for v in collected] == list(range(len(SCRIPT)))
    assert [s["action"] for s in logs[0].steps] == [int(t == HELP_AT) for t in range(len(SCRIPT))]
    offline = _offline_views(logs)
    assert offline == collected  # every field, state ids, texts and tokens included
    factory = _factory_views()
    assert [_history_only(v) for v in factory] == [_history_only(v) for v in collected]
    v = collected[-1]
    assert (v.last_class, v.repeats, v.calls, v.last_help, v.errors) == ("working", 1, 1, 3, 1)
    assert [c[:2] for c in v.past] == [
        (None, 0),
        ("working", 0),
        ("working", 1),
        ("working", 2),
        ("failed", 0),
        ("working", 0),
    ]
    assert collected[4].last_failure == "tool_error" and collected[5].context_tokens == 147
    rule = build_policy("turn0+after:repeat")
    fired = [rule.decide(views).tolist() for views in (collected, factory, offline)]
    assert fired[0] == fired[1] == fired[2] == [1, 0, 1, 1, 0, 0, 1]
    after_failed = build_policy("after:failed")
    assert after_failed.decide(factory).tolist() == [0, 0, 0, 0, 1, 0, 0]


def test_the_history_function_reads_partial_records():
    v = view_from_history(
        [{"kind": "call_tool", "tool_name": "a"}, {"kind": "call_tool", "tool_name": "a"}],
        state_id=1,
        task_id="w/0",
        text="",
        pending=1,
    )
    assert (v.depth, v.last_class, v.repeats, v.calls, v.last_help) == (2, "working", 1, 1, 2)
    odd = view_from_history(
        [{"kind": "telepathy", "failure": "x"}], state_id=1, task_id="w", text=""
    )
    assert (odd.last_class, odd.past, odd.errors, odd.last_failure) == (None, (), 1, "x")
