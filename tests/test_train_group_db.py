"""The GRPO rollout function (``AWMRollout``, TRL's ``rollout_func``) starts every member of
a group from the same initial database, also in a world whose seed rows are random (TRL's
trap: group members that do not share the initial state); ``test_env_factory`` checks the
same for the ``environment_factory`` path."""

from __future__ import annotations

import json
import shutil

import pytest
from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_world

from collect.awm.env import EnvConfig, EnvPool
from helpdp.policies import Always
from helpdp.train.gate import SplitSchedule

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


class _Recording:
    """The pool the rollout sees: the real one, with each environment's database digest
    taken right after its reset."""

    def __init__(self, pool):
        self.pool, self.digests = pool, []

    def scenario(self, name):
        return self.pool.scenario(name)

    def acquire(self, name):
        return _RecordingEnv(self.pool.acquire(name), self.digests)

    def release(self, env):
        self.pool.release(env.inner)


class _RecordingEnv:
    def __init__(self, inner, digests):
        self.inner, self._digests = inner, digests

    def reset(self, *args, **kwargs):
        out = self.inner.reset(*args, **kwargs)
        self._digests.append(self.inner.db_digest())
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_rollout_group_starts_from_one_initial_database(tmp_path):
    pytest.importorskip("transformers")
    from test_train import ASK, CALL, Expert, ScriptedBackend

    from helpdp.train.config import ModelConfig
    from helpdp.train.rollout import AWMRollout, GateRules, RolloutSettings, TokenActor
    from helpdp.train.tiny import build_tiny

    data = notes_world(tmp_path / "random", {"notes_1": NOTES_APP}, [(MILK_TASK, MILK_VERIFIER)])
    sample = data / "gen_sample.jsonl"
    rec = json.loads(sample.read_text())
    rec["sample_data"]["tables"][0]["insert_statements"] = [
        "INSERT INTO notes (body) VALUES (hex(randomblob(8)))"
    ]  # seed rows that differ between builds: each group member must still share one
    sample.write_text(json.dumps(rec) + "\n")
    _, tok = build_tiny(ModelConfig(), ["SYSTEM task", ASK, CALL, "EXPERT SAYS", MILK_TASK])
    config = EnvConfig(work_root=str(tmp_path / "work"))
    with EnvPool(data, config, scenarios=["notes_1"]) as pool:
        rec_pool = _Recording(pool)
        rollout = AWMRollout(
            rec_pool,
            [Expert()],
            {MILK_TASK: ("notes_1", 0)},
            lambda tr: TokenActor(ScriptedBackend(tok), tok, max_turn_tokens=64),
            Always(),
            SplitSchedule(kind="fixed", n_fixed=2, reference_group=4),
            rules=GateRules(design="agent", max_per_episode=1),
            settings=RolloutSettings(num_generations=4),
        )
        for _ in range(2):  # two groups of the task, one after the other
            out = rollout([[{"role": "user", "content": MILK_TASK}]] * 4)
            assert len(out["outcome"]) == 4
    assert len(rec_pool.digests) == 8 and len(set(rec_pool.digests)) == 1
