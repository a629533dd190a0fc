"""TRL's environment_factory over our runtime (helpdp.train.env_factory): the world's
tools as methods, the gated ask_expert, the graduated reward, on local sandboxes and on
an OpenEnv AWM server (ours, in OpenEnv mode); and one GRPO step through
``GRPOTrainer(..., environment_factory=...)`` with the tiny model of the smoke run."""

from __future__ import annotations

import inspect
import json

import pytest

from collect.awm.env import EnvConfig, EnvPool
from collect.interventions import InterventionConfig, build_interventions
from collect.worlds import WORLDS_DIR
from helpdp.policies import Always, Never
from helpdp.train.env_factory import AWMEnvironmentFactory

SCENARIO = "workflow_automation_1"
DENIED = "The expert is not available now; continue on your own."


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("envfactory")
    config = EnvConfig(expert_enabled=False, work_root=str(root))
    with EnvPool(WORLDS_DIR, config, scenarios=[SCENARIO]) as pool:
        yield pool


def _factory(pool, policy=None, **kw):
    oracle = build_interventions({"oracle": InterventionConfig(use_verifier=False)})
    return AWMEnvironmentFactory(
        pool, [SCENARIO], interventions=oracle, policy=policy or Always(), max_per_episode=1, **kw
    )


def _solve(env, pool, idx=0):
    for call in pool.scenario(SCENARIO).solutions[idx].calls:
        out = getattr(env, call["tool_name"])(**call["arguments"])
        assert not out.startswith("Error"), out


def test_methods_are_the_worlds_tools_with_their_schemas(pool):
    from transformers.utils import get_json_schema

    cls = _factory(pool).environments()
    env = cls()
    world = pool.acquire(SCENARIO)
    try:
        world.reset(0)
        names = {t.name for t in world.tools}
    finally:
        pool.release(world)
    methods = {
        n
        for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not n.startswith("_") and n not in ("reset", "get_reward")
    }
    assert methods == names | {"ask_expert"} and len(names) > 10
    schema = get_json_schema(env.set_variable)["function"]
    assert schema["parameters"]["required"] == ["key", "value"]
    props = schema["parameters"]["properties"]
    assert props["key"] == {"type": "string", "description": "Upper-case key."}
    assert props["workflow_id"]["type"] == "integer" and props["workflow_id"]["nullable"]
    for name in methods:  # every tool renders (TRL fails on a tool it cannot describe)
        get_json_schema(getattr(env, name))
    only = _factory(pool, tools=["set_variable", "list_variables"]).environments()
    assert {n for n, _ in inspect.getmembers(only, inspect.isfunction) if n[0] != "_"} == {
        "set_variable",
        "list_variables",
        "ask_expert",
        "reset",
        "get_reward",
    }


def test_graduated_reward_and_the_gated_expert(pool):
    f = _factory(pool)
    env = f.environments()()
    env.reset(scenario=SCENARIO, task_idx=0)  # solo completion
    _solve(env, pool)
    assert (env.get_reward(), env.outcome) == (2.0, "complete")
    env.reset(scenario=SCENARIO, task_idx=0)  # a blind call, granted, then the calls
    advice = env.ask_expert("what first?")
    assert (
        advice.startswith("Expert help: the next step is this call:") and "set_variable" in advice
    )
    assert env.ask_expert("and then?") == DENIED  # max_per_episode=1
    _solve(env, pool)
    assert (env.get_reward(), env.blind, env.recovery) == (0.8, 1, 0)
    env.reset(scenario=SCENARIO, task_idx=0)  # an error first, then the expert: recovery
    assert env.set_variable(key="X").startswith("Error: invalid arguments for set_variable")
    assert env.ask_expert("it failed") != DENIED
    _solve(env, pool)
    assert (env.get_reward(), env.blind, env.recovery) == (1.3, 0, 1)
    env.reset(scenario=SCENARIO, task_idx=0)  # nothing done: the verifier says others
    assert (env.get_reward(), env.outcome) == (0.1, "others")
    assert env.set_variable(key="A", value="b") == "Error: the episode is over."
    closed = _factory(pool, policy=Never()).environments()()
    closed.reset(scenario=SCENARIO, task_idx=0)
    assert closed.ask_expert("help") == DENIED and closed.get_reward() == 0.1
    assert len(f.gate.calls) == 2 and sum(f.gate.calls.values()) == 2


def test_the_factory_runs_on_an_openenv_server(tmp_path, monkeypatch):
    pytest.importorskip("openenv")
    import uvicorn
    from awm_helpers import served

    from collect.awm.openenv_server import create_openenv_app
    from collect.awm.remote_env import OpenEnvPool
    from collect.awm.serve import ServeConfig

    config = EnvConfig(expert_enabled=False, work_root=str(tmp_path / "server"))
    with EnvPool(WORLDS_DIR, config, scenarios=[SCENARIO]) as server_pool:
        app = create_openenv_app(server_pool, ServeConfig(max_sessions=4), token="tok")
        monkeypatch.setenv("OPENENV_AWM_TOKEN", "tok")
        with served(uvicorn.Config(app, log_level="warning", lifespan="off")) as url:
            with OpenEnvPool(url, WORLDS_DIR, EnvConfig(expert_enabled=False)) as remote:
                env = _factory(remote).environments()()
                env.reset(scenario=SCENARIO, task_idx=0)
                assert env.ask_expert("first?") != DENIED
                _solve(env, remote)
                assert (env.get_reward(), env.outcome) == (0.8, "complete")


def test_one_grpo_step_through_environment_factory(pool, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers.utils import get_json_schema
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_chat_template

    from helpdp.train.config import ModelConfig
    from helpdp.train.tiny import build_tiny, world_texts

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    f = _factory(pool, tools=["set_variable", "list_variables"])
    cls = f.environments()
    probe = cls()
    schemas = [
        json.dumps(get_json_schema(getattr(probe, n))) for n in ("set_variable", "ask_expert")
    ]
    corpus, _ = world_texts(pool, [(SCENARIO, 0)])
    model, tok = build_tiny(ModelConfig(vocab_size=1500), [*corpus, qwen3_chat_template, *schemas])
    tok.chat_template = qwen3_chat_template  # a template TRL can parse tool calls of
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=48,
        max_tool_calling_iterations=2,
        learning_rate=1e-3,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        logging_steps=1,
        disable_tqdm=True,
        save_strategy="no",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(f.rows([(SCENARIO, 0)])),
        processing_class=tok,
        environment_factory=cls,
    )
    assert {t.__name__ for t in trainer.tools} == {"set_variable", "list_variables", "ask_expert"}
    trainer.train()
    envs = trainer._environment_pool[None]
    assert len(envs) == 2 and sorted(e.episode_id for e in envs) == [0, 1]
    assert all(e.outcome in ("complete", "others") for e in envs)
    rewards = [e.last_reward for e in envs]
    log = next(r for r in trainer.state.log_history if "loss" in r)
    assert log[f"rewards/{cls.__name__}/mean"] == pytest.approx(sum(rewards) / 2)
    assert trainer.state.global_step == 1


def _group_digests(pool, scenario: str, members: int = 4) -> list[str]:
    """A GRPO group: ``members`` environments of one factory reset on one task; each one's
    database digest right after reset."""
    factory = AWMEnvironmentFactory(pool, [scenario], interventions=[], policy=Never())
    envs = [factory.environments()() for _ in range(members)]
    try:
        out = []
        for env in envs:
            env.reset(scenario=scenario, task_idx=0)
            out.append(env.env.db_digest())
        return out
    finally:
        for env in envs:
            env.get_reward()  # ends the episode: its world goes back to the pool


def test_a_grpo_group_starts_from_one_initial_database(pool, tmp_path):
    """Every member of a group starts from the same initial database (TRL's trap: group
    members that do not share the initial state), also after another episode changed its
    world, and also for a world whose seed rows are random: the database is built once per
    world and copied to each episode."""
    first = _group_digests(pool, SCENARIO)
    assert len(set(first)) == 1
    env = _factory(pool, policy=Never()).environments()()
    env.reset(scenario=SCENARIO, task_idx=0)
    assert not env.set_variable(key="CHANGED", value="yes").startswith("Error")
    assert env.env.db_digest() != first[0]
    env.get_reward()
    assert _group_digests(pool, SCENARIO) == first
    from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_world

    data = notes_world(tmp_path / "random", {"notes_1": NOTES_APP}, [(MILK_TASK, MILK_VERIFIER)])
    sample = data / "gen_sample.jsonl"
    rec = json.loads(sample.read_text())
    rec["sample_data"]["tables"][0]["insert_statements"] = [
        "INSERT INTO notes (body) VALUES (hex(randomblob(8)))"
    ]
    sample.write_text(json.dumps(rec) + "\n")
    config = EnvConfig(expert_enabled=False, work_root=str(tmp_path / "work"))
    with EnvPool(data, config, scenarios=["notes_1"]) as random_pool:
        assert len(set(_group_digests(random_pool, "notes_1"))) == 1
