"""``env.verify_semantics=official``: verifiers called and read as the official AWM
runtime's ``awm/core/verify.py`` does, against hand-made verifiers (docs/environments.md,
conformance); the default (``helpdp``) is unchanged for the same verifiers."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from collect.awm.dataset import AWMDataset
from collect.awm.env import AWMEnv, EnvConfig
from collect.awm.rewards import RewardConfig, episode_reward
from collect.awm.sandbox import SandboxLimits, VerifierPool
from collect.worlds import WORLDS_DIR

LIMITS = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60)
VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)
SCENARIO = "workflow_automation_1"

# a verify_... defined first is the one called (official); helpdp's pool calls the default
FOO_FIRST = """
def verify_foo(final_db_path):
    return {"result": "complete"}

def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    return {"result": "others"}
"""
ONLY_FINAL = """
def verify_task_completion(final_db_path):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    n = conn.execute("SELECT COUNT(*) FROM items").fetchone()[0]
    conn.close()
    return {"result": "complete" if n == 1 else "others"}
"""
PARTIAL = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    return {'result': 'partial'}
"""
RAISES = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    raise RuntimeError("verifier broke")
"""
SHORT = "x = 1"
POSITIONAL = """
def verify_task_completion(a, b, c):
    return {"result": "complete" if c == "Done." else "others"}
"""
NOT_A_DICT = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    return "complete"
"""
SQL_ANSWER = """
def verify_task(final_db_path, final_answer):
    return {"answer": final_answer, "final": final_db_path.endswith("final.db")}
"""
SQL_ERROR = """
def verify_task(initial_db_path, final_db_path):
    return {"execution_status": "error", "error_message": "no table"}
"""


@pytest.fixture(scope="module")
def pool_dbs(tmp_path_factory):
    root = tmp_path_factory.mktemp("verify_official")
    db = root / "initial.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO items (name) VALUES ('widget')")
    conn.commit()
    conn.close()
    with VerifierPool(1, VLIMITS, work_root=root / "pool") as pool:
        yield pool, db


def _run(pool_dbs, code, **kw):
    pool, db = pool_dbs
    return pool.run(code, initial_db=db, final_db=db, final_answer="Done.", **kw)


@pytest.mark.parametrize(
    ("code", "status", "verdict"),
    [
        (FOO_FIRST, "ok", "complete"),
        (ONLY_FINAL, "ok", "complete"),
        (PARTIAL, "ok", "others"),
        (POSITIONAL, "ok", "complete"),
        (RAISES, "error", None),
        (SHORT, "short_code", None),
        (NOT_A_DICT, "invalid_result", None),
    ],
)
def test_official_code_mode_picks_the_function_and_arguments_and_maps_the_result(
    pool_dbs, code, status, verdict
):
    outcome = _run(pool_dbs, code, semantics="official")
    assert (outcome.status, outcome.verdict) == (status, verdict), outcome


@pytest.mark.parametrize(
    ("code", "status", "label"),
    [
        (FOO_FIRST, "ok", "others"),  # the pool's default name, verify_task_completion
        (ONLY_FINAL, "error", None),  # final_answer and initial_db_path always passed
        (PARTIAL, "invalid_result", None),
        (POSITIONAL, "error", None),
        (RAISES, "error", None),
        (SHORT, "error", None),  # no function
        (NOT_A_DICT, "invalid_result", None),
    ],
)
def test_helpdp_semantics_unchanged_for_the_same_verifiers(pool_dbs, code, status, label):
    outcome = _run(pool_dbs, code)
    assert (outcome.status, outcome.label, outcome.verdict) == (status, label, None), outcome


def test_official_sql_mode_passes_an_empty_final_answer_and_reads_execution_status(pool_dbs):
    outcome = _run(pool_dbs, SQL_ANSWER, mode="sql", semantics="official")
    assert outcome.ok and outcome.result == {"answer": "", "final": True}
    assert outcome.verdict is None
    error = _run(pool_dbs, SQL_ERROR, mode="sql", semantics="official")
    assert error.status == "error" and "execution_status" in error.message
    assert _run(pool_dbs, SQL_ERROR, mode="sql").ok  # helpdp: the dict is the evidence


def test_unknown_semantics_is_refused(pool_dbs):
    with pytest.raises(ValueError, match="semantics"):
        _run(pool_dbs, PARTIAL, semantics="openenv")


def _world(root: Path, verifiers: dict[int, str]) -> Path:
    """The demo world filtered to one scenario, its verifiers replaced."""
    root.mkdir(parents=True, exist_ok=True)
    for src in Path(WORLDS_DIR).glob("*.jsonl"):
        out = []
        for line in src.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("scenario", rec.get("name")) != SCENARIO:
                continue
            if src.name == "gen_verifier.pure_code.jsonl" and rec["task_idx"] in verifiers:
                rec["verification"]["code"] = verifiers[rec["task_idx"]]
            out.append(json.dumps(rec))
        (root / src.name).write_text("\n".join(out) + "\n")
    (root / "clock.txt").write_text((Path(WORLDS_DIR) / "clock.txt").read_text())
    return root


def test_episode_outcomes_official_and_default(tmp_path):
    data = _world(tmp_path / "data", {0: PARTIAL, 1: RAISES, 2: SHORT})
    dataset = AWMDataset(data)
    expected = {
        "official": ["others", "judge_error", "judge_error"],
        "helpdp": ["verifier_error", "verifier_error", "verifier_error"],
    }
    for semantics, outcomes in expected.items():
        config = EnvConfig(
            sandbox=LIMITS,
            verifier_sandbox=VLIMITS,
            verifier_mode="code",
            verify_semantics=semantics,
        )
        with AWMEnv(
            dataset.get(SCENARIO), config, work_root=tmp_path / semantics, clock=dataset.clock()
        ) as env:
            got = []
            for task in range(3):
                env.reset(task)
                got.append(env.verify("Done."))
        assert [v.outcome for v in got] == outcomes, got
        assert not any(v.valid for v in got[1:])  # judge_error, too: no verdict on the agent
        assert [v.status for v in got][1:] == [
            "error",
            "short_code" if semantics == "official" else "error",
        ]
    # judge_error is given others' reward (episode_reward's fallback), as verifier_error is
    assert episode_reward("judge_error", RewardConfig(others=0.25)) == 0.25


def test_unknown_verify_semantics_is_refused(tmp_path):
    dataset = AWMDataset(_world(tmp_path / "data", {}))
    with pytest.raises(ValueError, match="verify_semantics"):
        AWMEnv(dataset.get(SCENARIO), EnvConfig(verify_semantics="openenv"))
