"""``collect.awm.check`` names a verifier that fails only because the sandbox withholds
part of Python (a module, an ``os`` function) that the official AWM runtime allows: such a
task fails in helpdp's runtime and not upstream, which a user comparing numbers must
know (issue on AWM conformance: "the dataset's known traps caught")."""

from __future__ import annotations

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


def test_a_verifier_failing_on_a_withheld_module_is_named(tmp_path):
    tasks = [(MILK_TASK, MILK_VERIFIER), (MILK_TASK, SUBPROCESS), (MILK_TASK, OS_SYSTEM)]
    tasks.append((MILK_TASK, OWN_BUG))
    data = notes_world(tmp_path / "data", {"notes_1": NOTES_APP}, tasks)
    cfg = CheckConfig(
        data=str(data),
        sandbox=SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60),
        verifier_sandbox=SandboxLimits(memory_mb=512, call_timeout_s=30.0),
        exercise_tools=False,
        jobs=1,
    )
    (row,) = check_dataset(cfg, out=None).scenarios
    assert row.verifiers == 4 and row.verifiers_ok == 1, row
    by_task = {t: next(d for d in row.defects if f"(task {t})" in d) for t in (1, 2, 3)}
    assert "because the sandbox withholds module 'subprocess'" in by_task[1], by_task[1]
    assert "because the sandbox withholds os.system" in by_task[2], by_task[2]
    assert "the official runtime allows it" in by_task[2]
    assert "withholds" not in by_task[3] and "KeyError" in by_task[3], by_task[3]
