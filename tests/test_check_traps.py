"""The dataset's known traps, caught by ``collect.awm.check`` (issue on AWM conformance):
a verifier that fails only because the sandbox withholds part of Python (a module, an
``os`` function) that the official AWM runtime allows (such a task fails in helpdp's
runtime and not upstream, which a user comparing numbers must know), and a world whose
seed rows differ between two builds of its initial database (every reset, and every
member of a GRPO group, would start from another state)."""

from __future__ import annotations

import json

import pytest
from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_world

from collect.awm.check import CheckConfig, check_dataset, withheld
from collect.awm.sandbox import SandboxLimits

SUBPROCESS = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import subprocess
    return {"result": "others"}
"""
OS_SYSTEM = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import os
    os.system("true")
    return {"result": "others"}
"""
OWN_BUG = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    return {"result": {}["missing"]}
"""


@pytest.mark.parametrize(
    "message, what",
    [
        (
            "ImportError: sandbox: import of 'subprocess' is not allowed (line 3)",
            "module 'subprocess'",
        ),
        ("ImportError: sandbox: import of 'ctypes.util' is not allowed", "module 'ctypes.util'"),
        ("AttributeError: module 'os' has no attribute 'system'", "os.system"),
        ("AttributeError: module 'os' has no attribute 'execv'", "os.execv"),
        ("AttributeError: module 'os' has no attribute 'no_such_fn'", None),  # not withheld
        ("AttributeError: module 'os' has no attribute 'path'", None),  # os.path is allowed
        ("KeyError: 'missing'", None),
    ],
)
def test_withheld_reads_the_sandbox_refusals(message, what):
    assert withheld(message) == what


def _config(data) -> CheckConfig:
    return CheckConfig(
        data=str(data),
        sandbox=SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60),
        verifier_sandbox=SandboxLimits(memory_mb=512, call_timeout_s=30.0),
        exercise_tools=False,
        jobs=1,
    )


def test_a_verifier_failing_on_a_withheld_module_is_named(tmp_path):
    tasks = [(MILK_TASK, MILK_VERIFIER), (MILK_TASK, SUBPROCESS), (MILK_TASK, OS_SYSTEM)]
    tasks.append((MILK_TASK, OWN_BUG))
    data = notes_world(tmp_path / "data", {"notes_1": NOTES_APP}, tasks)
    (row,) = check_dataset(_config(data), out=None).scenarios
    assert row.verifiers == 4 and row.verifiers_ok == 1, row
    by_task = {t: next(d for d in row.defects if f"(task {t})" in d) for t in (1, 2, 3)}
    assert "because the sandbox withholds module 'subprocess'" in by_task[1], by_task[1]
    assert "because the sandbox withholds os.system" in by_task[2], by_task[2]
    assert "the official runtime allows it" in by_task[2]
    assert "withholds" not in by_task[3] and "KeyError" in by_task[3], by_task[3]


def _with_seed_row(data, insert: str) -> None:
    path = data / "gen_sample.jsonl"
    rec = json.loads(path.read_text())
    rec["sample_data"]["tables"][0]["insert_statements"] = [insert]
    path.write_text(json.dumps(rec) + "\n")


def test_seed_rows_that_differ_between_two_builds_are_a_defect(tmp_path):
    data = notes_world(tmp_path / "random", {"notes_1": NOTES_APP}, [(MILK_TASK, MILK_VERIFIER)])
    _with_seed_row(data, "INSERT INTO notes (body) VALUES (hex(randomblob(8)))")
    (row,) = check_dataset(_config(data), out=None).scenarios
    (line,) = [d for d in row.defects if "differ between two builds" in d]
    assert line.startswith("gen_sample.jsonl") and "every reset is another world" in line
    assert row.status == "failed"
    # the same world with a fixed seed row (and one on the world clock's date) is ok
    fixed = notes_world(tmp_path / "fixed", {"notes_1": NOTES_APP}, [(MILK_TASK, MILK_VERIFIER)])
    _with_seed_row(fixed, "INSERT INTO notes (body) VALUES (datetime('now'))")
    (row,) = check_dataset(_config(fixed), out=None).scenarios
    assert not [d for d in row.defects if "differ" in d] and row.status == "ok", row
