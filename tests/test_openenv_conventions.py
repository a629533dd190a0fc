"""The OpenEnv-mode server's two reward conventions (``reward_convention``,
docs/openenv.md): ``helpdp`` (the default: a verdict's reward type is helpdp's outcome,
its reward ``env.rewards``'; ``done`` without a ``verify`` verifies first) and
``openenv`` (OpenEnv AWM's own server: a verifier that gives no verdict is
``judge_error``; only complete, incomplete and format errors are rewarded; ``done``
never verifies). Driven in process on a hand-made notes world: task 0 honest, task 1 a
verifier that raises."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv")

from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_world  # noqa: E402
from openenv.core.env_server.mcp_types import CallToolAction  # noqa: E402

from collect.awm.env import EnvConfig, EnvPool  # noqa: E402
from collect.awm.openenv_server import (  # noqa: E402
    ConfinedAWMEnvironment,
    OpenEnvServeConfig,
    create_openenv_app,
)
from collect.awm.rewards import RewardConfig, verdict_reward  # noqa: E402

RAISES = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    raise RuntimeError("this verifier is broken")
"""
MILK = {"body": "remember the milk"}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("conventions")
    data = notes_world(
        root / "data", {"notes_1": NOTES_APP}, [(MILK_TASK, MILK_VERIFIER), (MILK_TASK, RAISES)]
    )
    # others rewarded 0.5 here: helpdp's convention pays it, OpenEnv's has no such key
    config = EnvConfig(
        expert_enabled=False, work_root=str(root / "work"), rewards=RewardConfig(others=0.5)
    )
    p = EnvPool(data, config)
    yield p
    p.close()


def _step(env, tool, **args):
    obs = env.step(CallToolAction(tool_name=tool, arguments=args))
    return obs.reward_type, obs.reward, obs.done


@pytest.mark.parametrize(
    "convention, early, broken, done_only",
    [
        ("helpdp", ("others", 0.5, False), ("verifier_error", 0.5, False), ("complete", 1.0, True)),
        (
            "openenv",
            ("others", 0.0, False),
            ("judge_error", 0.0, False),
            ("episode_done", 0.0, True),
        ),
    ],
)
def test_each_convention_names_and_rewards_verdicts_as_its_server(
    pool, convention, early, broken, done_only
):
    env = ConfinedAWMEnvironment(pool, convention)
    try:
        assert env.reset(scenario="notes_1", task_idx=0).reward_type == "reset_ok"
        assert _step(env, "verify") == early  # code mode, not done yet: others
        assert _step(env, "add_note", **MILK)[:2] == ("tool_call_ok", 0.0)
        assert _step(env, "verify") == ("complete", 1.0, False)  # both: complete 1.0
        env.reset(scenario="notes_1", task_idx=1)
        assert _step(env, "verify") == broken  # the verifier raised
        # done with no verify since the world changed: helpdp verifies, OpenEnv does not
        env.reset(scenario="notes_1", task_idx=0)
        _step(env, "add_note", **MILK)
        assert _step(env, "done") == done_only
        env.reset(scenario="notes_1", task_idx=0)
        assert _step(env, "no_such_tool") == ("tool_not_found", -1.0, False)  # both
    finally:
        env.close()


def test_the_convention_is_the_servers_option(pool):
    assert OpenEnvServeConfig().reward_convention == "helpdp"
    with pytest.raises(ValueError, match="reward_convention must be one of"):
        create_openenv_app(pool, OpenEnvServeConfig(reward_convention="trl"), token="t")
    with pytest.raises(ValueError, match="reward_convention must be one of"):
        ConfinedAWMEnvironment(pool, "trl")
    # the verdicts side by side (docs/openenv.md's table)
    rewards = RewardConfig()
    table = {
        o: (verdict_reward(o, rewards), verdict_reward(o, rewards, "openenv"))
        for o in (
            "complete",
            "incomplete",
            "others",
            "verifier_error",
            "no_verifier",
            "server_error",
        )
    }
    assert table == {
        "complete": (("complete", 1.0), ("complete", 1.0)),
        "incomplete": (("incomplete", 0.1), ("incomplete", 0.1)),
        "others": (("others", 0.0), ("others", 0.0)),
        "verifier_error": (("verifier_error", 0.0), ("judge_error", 0.0)),
        "no_verifier": (("no_verifier", 0.0), ("no_verifier", 0.0)),
        "server_error": (("server_error", 0.0), ("server_error", 0.0)),
    }
