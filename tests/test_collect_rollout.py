"""The episode loop on a scripted stand-in environment: infrastructure failures are
recorded as server errors (never dropped), lock-step batching does not change the
records, state texts keep the task and the latest turns within the budget."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from collect.actors import SimulatedActor
from collect.awm.protocol import format_call_tool, parse_turn
from collect.interventions import InterventionConfig, Oracle
from collect.rollout import RunContext, TextRenderer, TurnReply, episode_tables, run_episodes
from collect.schedule import ScheduleConfig, SplitConfig, build_schedule
from collect.statekey import make_keys


@dataclass
class Tool:
    name: str


@dataclass
class Reset:
    system_prompt: str
    task: str


@dataclass
class Step:
    observation: str
    reward: float | None
    done: bool
    info: dict


@dataclass
class Solution:
    calls: list
    final_answer: str | None = None


@dataclass
class Scenario:
    name: str
    solutions: dict = field(default_factory=dict)


class FakeEnv:
    """Accepts calls of the reference solution; ``crash_on``: a tool whose call raises,
    ``die_on``: a tool whose call kills the app (the runtime's server_error outcome)."""

    def __init__(self, scenario, crash_on=None, die_on=None):
        self.scenario = scenario
        self.tools = [Tool("get_item"), Tool("update_item"), Tool("boom")]
        self.crash_on, self.die_on = crash_on, die_on
        self.closed = False
        self.turn = 0

    def reset(self, task_idx, episode_id=None):
        self.turn, self.task_idx = 0, task_idx
        self.calls = []
        return Reset("SYSTEM", f"task {task_idx}: update item 1")

    def step(self, text):
        self.turn += 1
        a = parse_turn(text, expert_enabled=False)
        info = {
            "action": a.as_dict(),
            "failure": a.failure.value if a.failure else None,
            "format_error": a.is_format_error,
        }
        if a.kind == "call_tool" and a.tool_name == self.crash_on:
            raise RuntimeError("pipe broke")
        if a.kind == "call_tool" and a.tool_name == self.die_on:
            info.update(
                outcome="server_error",
                valid=False,
                verification={"mode": "none", "message": "worker died"},
            )
            return Step("Error: server error", 0.0, True, info)
        if a.kind == "final":
            ok = self.calls == [
                c["tool_name"] for c in self.scenario.solutions[self.task_idx].calls
            ]
            info.update(
                outcome="complete" if ok else "others", valid=True, verification={"mode": "code"}
            )
            return Step("", 1.0 if ok else 0.0, True, info)
        if a.is_format_error:
            info.update(outcome="format_error", valid=False, verification={"mode": "none"})
            return Step(f"Error: {a.message}", -1.0, True, info)
        if a.kind == "call_tool":
            self.calls.append(a.tool_name)
        return Step('{"ok": true}', None, False, info)

    def verify(self, answer=None):
        return type("V", (), {"outcome": "others"})()

    def truncate(self):
        ok = self.calls == [c["tool_name"] for c in self.scenario.solutions[self.task_idx].calls]
        info = {
            "action": {"kind": "context_full"},
            "failure": None,
            "format_error": False,
            "truncated": True,
            "context_full": True,
            "outcome": "complete" if ok else "others",
            "valid": True,
            "verification": {"mode": "code"},
        }
        return Step("", 1.0 if ok else 0.0, True, info)

    def close(self):
        self.closed = True


class FakePool:
    def __init__(self, **env_kwargs):
        calls = [
            {"tool_name": "get_item", "arguments": {"item_id": 1}},
            {"tool_name": "update_item", "arguments": {"item_id": 1, "status": "done"}},
        ]
        self.sc = Scenario("fake_1", {i: Solution(calls) for i in range(4)})
        self.env_kwargs = env_kwargs
        self.released, self.envs = [], []

    def scenario(self, name):
        return self.sc

    def acquire(self, name):
        env = FakeEnv(self.sc, **self.env_kwargs)
        self.envs.append(env)
        return env

    def release(self, env):
        self.released.append(env)


def _ctx(pool, max_tokens=0):
    oracle = Oracle("oracle", InterventionConfig(use_verifier=False))
    return RunContext(pool, [oracle], make_keys("history"), TextRenderer(max_tokens))


def _specs(probabilities=(0.0, 0.5, 1.0), seeds=(0, 1, 2)):
    tasks = [("fake_1", i) for i in range(4)]
    cfg = ScheduleConfig(probabilities=list(probabilities), seeds=list(seeds))
    return build_schedule(tasks, 1, cfg, SplitConfig(validation=0, test=0))


def test_lock_step_batches_give_the_same_records():
    specs = _specs()
    one = run_episodes(specs, SimulatedActor(), _ctx(FakePool()), batch_size=1)
    many = run_episodes(specs, SimulatedActor(), _ctx(FakePool()), batch_size=5)
    few_threads = run_episodes(specs, SimulatedActor(), _ctx(FakePool()), batch_size=5, threads=2)
    for other in (many, few_threads):
        assert [lg.steps for lg in one] == [lg.steps for lg in other]
        assert [lg.episode for lg in one] == [lg.episode for lg in other]
        assert [lg.states for lg in one] == [lg.states for lg in other]
    assert any(lg.episode["success"] for lg in one)
    tables = episode_tables(one, ["oracle"])
    assert tables["steps"].num_rows == sum(len(lg.steps) for lg in one)
    assert tables["episodes"].column("calls_oracle").to_pylist() == [
        lg.episode["calls_oracle"] for lg in one
    ]


def test_environment_crash_is_a_recorded_server_error():
    pool = FakePool(crash_on="update_item")
    logs = run_episodes(_specs(seeds=(0,)), SimulatedActor(), _ctx(pool))
    crashed = [lg for lg in logs if lg.episode["outcome"] == "server_error"]
    assert crashed and all("pipe broke" in lg.episode["error"] for lg in crashed)
    for lg in crashed:
        last = lg.steps[-1]
        assert (
            last["kind"] == "error" and lg.states[-1]["terminal"] and not lg.states[-1]["success"]
        )
        assert lg.episode["steps"] == len(lg.steps) and not lg.episode["valid"]
    # a crashed environment is closed, never handed to the next episode
    assert all(env.closed for env in pool.envs if env not in pool.released)
    assert not any(env.closed for env in pool.released)


def test_dead_app_ends_the_episode_as_server_error():
    pool = FakePool(die_on="update_item")
    logs = run_episodes(_specs(seeds=(0,)), SimulatedActor(), _ctx(pool))
    died = [lg for lg in logs if lg.episode["outcome"] == "server_error"]
    assert died and all(lg.episode["end_reason"] == "server_error" for lg in died)
    assert all(lg.episode["error"] == "worker died" for lg in died)


def test_actor_failure_is_recorded_per_episode():
    class Broken:
        name = "broken"

        def generate(self, requests):
            return [TurnReply("", error="HTTP 503") for _ in requests]

    logs = run_episodes(_specs(seeds=(0,)), Broken(), _ctx(FakePool()), batch_size=4)
    assert all(lg.episode["outcome"] == "server_error" for lg in logs)
    assert all("HTTP 503" in lg.episode["error"] and len(lg.steps) == 1 for lg in logs)


def test_text_budget_keeps_the_task_and_latest_turns():
    r = TextRenderer(max_tokens=40)
    entries = [("user", "TASK " * 10)] + [("tool", f"obs{i} " * 10) for i in range(10)]
    text = r.render(entries, note="episode over: final")
    assert text.startswith("<|user|>\nTASK") and "obs9" in text and "obs0" not in text
    assert "earlier entries omitted" in text
    assert r.count(text) <= 40 + r.count("[... 10 earlier entries omitted ...]\n")
    full = TextRenderer(0).render(entries)
    assert all(f"obs{i}" in full for i in range(10))
    cut = TextRenderer(3).render([("user", "x" * 100)])
    assert cut.startswith("<|user|>") and len(cut) <= 12  # a task longer than the budget is cut


@pytest.mark.parametrize("key", ["history", "db"])
def test_terminal_keys_depend_on_the_outcome(key):
    keys = make_keys(key)
    el = {"help": 0, "action": {"kind": "final", "text": "done"}, "observation": ""}
    a = keys.terminal(b"c", "t/1", 3, el, "final", "complete", "d")
    b = keys.terminal(b"c", "t/1", 3, el, "final", "others", "d")
    c = keys.step(b"c", "t/1", 3, el, "d")[0]
    assert len({a, b, c}) == 3


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["collect/actor=openai"], "actor.model is required"),
        (["collect/actor=openai", "actor.model=m"], "actor.base_url is required"),
        (["collect/interventions=expert_llm"], "expert_llm needs base_url and model"),
        (["state_key=tree"], "state_key must be one of"),
        (["schedule.probabilities=[2.0]"], r"lie in \[0, 1\]"),
        (["schedule.splits=[test]", "split.test=0"], "the schedule is empty"),
    ],
)
def test_bad_configs_are_refused_before_any_work(tmp_path, overrides, message):
    from collect.collector import collect, collect_config

    cfg = collect_config([f"out={tmp_path / 'ds'}", "progress=false", *overrides])
    with pytest.raises(ValueError, match=message):
        collect(cfg)
    assert not (tmp_path / "ds" / "shards").exists()


@pytest.mark.parametrize("after", [2, 1])
def test_a_full_context_ends_the_episode_as_the_agents_end_verified(after):
    """A prompt past the model's window (``TurnReply.context_full``) is the agent's end,
    not its runtime's: the episode is truncated there and its world verified (valid,
    ``end_reason`` context_full, the error kept), never a server error that reruns."""

    calls = [
        format_call_tool("get_item", {"item_id": 1}),
        format_call_tool("update_item", {"item_id": 1, "status": "done"}),
    ]

    class FillsUp:  # the reference calls, then a prompt that does not fit
        name = "fills-up"

        def generate(self, requests):
            return [
                TurnReply(calls[r.view.turn], 10, 5)
                if r.view.turn < after
                else TurnReply("", 33852, 0, error="HTTP 400: too long", context_full=True)
                for r in requests
            ]

    logs = run_episodes(_specs((0.0,), seeds=(0,)), FillsUp(), _ctx(FakePool()))
    for lg in logs:
        ep = lg.episode
        assert ep["end_reason"] == "context_full" and ep["valid"]
        assert ep["error"] == "HTTP 400: too long"
        assert ep["outcome"] == ("complete" if after == 2 else "others")
        assert ep["success"] == (after == 2) and ep["steps"] == after + 1 == len(lg.steps)
        assert lg.steps[-1]["kind"] == "context_full" and lg.states[-1]["terminal"]
