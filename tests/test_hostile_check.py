"""The do-nothing check (``python -m collect.awm.check``) against verifiers that need only
an answer.

A task that passes on the untouched database is a free reward: an agent that does
nothing and says anything gets ``complete``. The check ran code-mode verifiers with
``final_answer=None`` only, so a verifier that says complete for any answer (or for any
non-empty one, or for the empty one) passed it. Here one world holds such verifiers next
to an honest one and an honest question (complete only for the right answer): each of
the first three is a named defect and fails the scenario, the honest ones are ok, and
the next check of an honest world is ok.
"""

from __future__ import annotations

import io

from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_world

from collect.awm.check import CheckConfig, check_dataset, run_check
from collect.awm.sandbox import SandboxLimits

LIMITS = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60)
VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)

# complete for any answer at all, whatever the database holds
ANY_ANSWER = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    return {"result": "complete" if final_answer is not None else "others"}
"""
# complete for any non-empty answer
NON_EMPTY = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    return {"result": "complete" if final_answer else "others"}
"""
# complete for the empty answer (a verifier that compares to a missing value)
EMPTY = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    return {"result": "complete" if final_answer == "" else "others"}
"""
COUNT_TASK = "How many notes are there? Answer with the number."
# an honest question: complete for the right answer only (the database holds one note)
COUNT_VERIFIER = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    (n,) = sqlite3.connect(final_db_path).execute("SELECT COUNT(*) FROM notes").fetchone()
    return {"result": "complete" if (final_answer or "").strip() == str(n) else "others"}
"""


def _config(data) -> CheckConfig:
    return CheckConfig(
        data=str(data), sandbox=LIMITS, verifier_sandbox=VLIMITS, exercise_tools=False, jobs=1
    )


def test_a_verifier_that_needs_only_an_answer_is_a_defect(tmp_path):
    tasks = [
        (MILK_TASK, MILK_VERIFIER),  # 0: honest
        (MILK_TASK, ANY_ANSWER),  # 1
        (MILK_TASK, NON_EMPTY),  # 2
        (MILK_TASK, EMPTY),  # 3
        (COUNT_TASK, COUNT_VERIFIER),  # 4: honest, needs the right answer
    ]
    data = notes_world(tmp_path / "data", {"notes_1": NOTES_APP}, tasks)
    out = io.StringIO()
    assert run_check(_config(data), out) == 1
    report = check_dataset(_config(data), out=None)
    (row,) = report.scenarios
    assert row.status == "failed", row
    assert row.verifiers == 5 and row.verifiers_ok == 2, row
    assert row.errors == [], row.errors
    where = "gen_verifier.pure_code.jsonl:{} (task {}): verifier says complete on the untouched"
    flagged = sorted(d for d in row.defects if "says complete" in d)
    assert len(flagged) == 3, row.defects
    for task, answer in ((1, ""), (2, "Done."), (3, "")):  # the first answer it passes
        line = next(d for d in flagged if f"(task {task})" in d)
        assert line.startswith(where.format(task + 1, task)), line
        given = f"database with the final answer {answer!r}"
        assert line.endswith(given), line
    assert not any("(task 0)" in d or "(task 4)" in d for d in row.defects), row.defects
    text = out.getvalue()
    assert "failed  notes_1:" in text and "with the final answer 'Done.'" in text


def test_the_next_check_of_an_honest_world_is_ok(tmp_path):
    tasks = [(MILK_TASK, MILK_VERIFIER), (COUNT_TASK, COUNT_VERIFIER)]
    data = notes_world(tmp_path / "data", {"notes_1": NOTES_APP}, tasks)
    report = check_dataset(_config(data), out=None)
    (row,) = report.scenarios
    assert row.status == "ok" and row.verifiers_ok == 2 and row.defects == [], row
