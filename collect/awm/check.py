"""``python -m collect.awm.check data=DIR``: load and exercise every scenario of an AWM directory.

For each scenario (every name found in any file) the check builds its database
(reporting rows SQLite rejects after repair), starts its app in a sandboxed
worker and lists its tools, *exercises* it (each read-only tool called once, with
the arguments of a reference solution where it needs some, under the limits of an
episode: the same sandbox, per-call wall clock and ``tool_budget_s``; the line
reports the calls, their time and the worker's CPU), and runs each task's verifiers on the untouched
database (a code-mode verifier must not say ``complete`` there, whatever the final
answer: none, empty or an arbitrary one, :data:`DO_NOTHING_ANSWERS`; a SQL-mode one
must return a dict). One line per scenario, defects indented below it, then
``checked N scenarios: K ok, P partial, F failed``. Exit status 1 if any
scenario failed; 2 when there is nothing to check (no scenario in ``data``, or none
of ``scenarios`` found).

Status of a scenario:

* ``failed`` - something present could not be used: our runtime could not run
  it (the app does not start or exposes no tools, a worker timed out or
  crashed) or, with ``defects_fail`` (default), the data itself is defective
  (a verifier that does not compile, raises or says complete on the untouched
  database; an INSERT SQLite rejects after repair; DDL that fails; a record
  that cannot be decoded). Each defect is listed with its file:line location.
* ``partial`` - some ``required`` pieces are absent from the files; the rest
  was checked (the line says which pieces are missing).
* ``ok`` - all required pieces are present and every check passed.

With no ``data=`` the shipped demo worlds (``collect/worlds/``) are checked.
Fields of :class:`CheckConfig` are documented where declared (``--help``).
"""

from __future__ import annotations

import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from collect.awm.app import build_scenario_database
from collect.awm.clock import WorldClock, clock_field
from collect.awm.dataset import CORE_PIECES, FILES, AWMDataset, Scenario
from collect.awm.env import AWMEnv, EnvConfig
from collect.awm.sandbox import (
    COMMAND_ERRORS,
    AppWorker,
    SandboxError,
    SandboxLimits,
    VerifierPool,
    check_isolation,
    default_work_root,
)
from collect.awm.sandbox.rmtree import remove_tree
from collect.awm.sandbox.rules import SYS_ALLOW, os_attribute_allowed
from collect.awm.tools import Tool, tools_from_openapi
from collect.awm.verification import run_database_digest, verifier_world
from collect.worlds import WORLDS_DIR
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app

__all__ = [
    "CheckConfig",
    "CheckReport",
    "ScenarioCheck",
    "check_dataset",
    "check_scenario",
    "passes_untouched",
    "run_check",
]


@dataclass
class CheckConfig:
    """``python -m collect.awm.check``: check that an AWM-format directory loads and runs."""

    data: str | None = _f(
        None, "AWM-format directory (gen_*.jsonl); null: the demo worlds in collect/worlds/"
    )
    scenarios: list[str] = _f([], "check only these scenarios (normalized names); empty: all")
    required: list[str] = _f(
        list(CORE_PIECES),
        "pieces a scenario needs to be ok (others are reported): description, tasks, db, sample, spec, "
        "env, verifiers, sql_verifiers, solutions",
    )
    defects_fail: bool = _f(
        True, "a data defect (bad verifier, rejected INSERT, ...) makes its scenario failed"
    )
    exercise_tools: bool = _f(
        True,
        "call each read-only (GET) tool once under the limits of an episode (arguments from "
        "a reference solution where the tool needs some; tools without either are skipped)",
    )
    tool_budget_s: float = _f(
        60.0, "wall-clock seconds all exercising calls of one scenario may take together"
    )
    reset_twice: bool = _f(
        True,
        "build the initial database a second time and compare the two (digests of every "
        "table's rows): seed rows that differ between resets are a defect",
    )
    run_verifiers: bool = _f(True, "run code-mode verifiers on the untouched database")
    run_sql_verifiers: bool = _f(
        True, "run SQL-mode verifiers on the untouched database (no judge)"
    )
    clock: str = clock_field()
    jobs: int = _f(2, "scenarios checked in parallel (each uses its own worker processes)")
    max_defects_shown: int = _f(20, "defect lines printed per scenario (all are counted)")
    sandbox: SandboxLimits = _f(SandboxLimits(call_timeout_s=20.0), "limits of the app workers")
    verifier_sandbox: SandboxLimits = _f(
        SandboxLimits(memory_mb=1024, call_timeout_s=30.0), "limits of the verifier workers"
    )


@dataclass
class ScenarioCheck:
    """What :func:`check_scenario` found for one scenario."""

    name: str
    status: str = "ok"
    missing: list[str] = field(default_factory=list)
    tools: int | None = None
    rows_loaded: int = 0
    rows_total: int = 0
    rows_repaired: int = 0
    tables: int | None = None
    tasks: int | None = None
    verifiers: int = 0
    verifiers_ok: int = 0
    sql_verifiers: int = 0
    sql_verifiers_ok: int = 0
    tool_calls: int = 0
    tool_failures: int = 0
    tool_seconds: float = 0.0
    app_cpu_seconds: float | None = None
    defects: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        tools = f"{self.tools} tools" if self.tools is not None else "no app"
        rows = (
            f"rows {self.rows_loaded}/{self.rows_total}"
            + (f" ({self.rows_repaired} repaired)" if self.rows_repaired else "")
            if self.tables is not None
            else "no database"
        )
        tasks = f"{self.tasks} tasks" if self.tasks is not None else "no tasks"
        n = self.tasks or 0
        ver = f"verifiers {self.verifiers}/{n} code ({self.verifiers_ok} ok), {self.sql_verifiers}/{n} sql ({self.sql_verifiers_ok} ok)"
        parts = [f"{self.status:<7} {self.name}: {tools}, {rows}, {tasks}, {ver}"]
        if self.tool_calls:
            cpu = f", app cpu {self.app_cpu_seconds:.2f} s" if self.app_cpu_seconds else ""
            parts.append(
                f"exercised {self.tool_calls} read-only tools ({self.tool_failures} failed, "
                f"{self.tool_seconds:.2f} s{cpu})"
            )
        if self.missing:
            parts.append("missing: " + ", ".join(self.missing))
        if self.defects:
            parts.append(f"{len(self.defects)} defect{'s' if len(self.defects) != 1 else ''}")
        if self.errors:
            parts.append(f"{len(self.errors)} error{'s' if len(self.errors) != 1 else ''}")
        return "; ".join(parts)


def withheld(message: str) -> str | None:
    """What of Python the sandbox withholds that ``message`` (an exception's text) says a
    dataset's code reached for: ``module 'subprocess'``, ``os.system``; None where the
    error is the code's own. The official runtime (and OpenEnv's, but for ``os``) allows
    these, so such a task fails here and not there."""
    m = re.search(r"sandbox: import of '([\w.]+)' is not allowed", message)
    if m:
        return f"module {m.group(1)!r}"
    for m in re.finditer(r"module '(os|sys)' has no attribute '(\w+)'", message):
        mod, name = m.groups()
        if mod == "os" and not os_attribute_allowed(name):
            return f"os.{name}"
        if mod == "sys" and name not in SYS_ALLOW and hasattr(sys, name):
            return f"sys.{name}"
    return None


def _verifier_defect(record, outcome) -> str:
    where = f"{record.location} (task {record.task_idx})"
    if outcome.status == "syntax_error":
        return f"{where}: {outcome.message}"
    if outcome.status == "invalid_result":
        return f"{where}: verifier returned an invalid result: {outcome.message}"
    what = withheld(outcome.message or "")
    if what is not None:
        return (
            f"{where}: verifier raised on the untouched database because the sandbox withholds "
            f"{what} (the official runtime allows it: the task fails here, not there): "
            f"{outcome.message}"
        )
    return f"{where}: verifier raised on the untouched database: {outcome.message}"


def check_scenario(
    scenario: Scenario,
    config: CheckConfig,
    pool: VerifierPool,
    work_dir: Path,
    clock: WorldClock,
) -> ScenarioCheck:
    """Check one scenario (never raises for problems in the data)."""
    result = ScenarioCheck(
        scenario.name, tasks=scenario.n_tasks if scenario.tasks is not None else None
    )
    result.missing = scenario.missing(config.required)
    result.defects.extend(str(p) for p in scenario.problems)
    work_dir.mkdir(parents=True, exist_ok=True)
    db_path: Path | None = None

    if scenario.db_schema is not None:
        try:
            db_path, report = build_scenario_database(
                scenario, work_dir / "db", clock=clock, limits=config.sandbox
            )
        except SandboxError as e:  # a limit, a crash: the scenario has no database
            where = scenario.locations.get("sample") or FILES.get("sample", "gen_sample.jsonl")
            result.errors.append(f"{where}: database not built: {e.message}")
        else:
            result.tables = report.tables_created
            result.rows_loaded, result.rows_total = report.rows_loaded, report.rows_total
            result.rows_repaired = report.rows_repaired
            result.defects.extend(str(f) for f in report.failures)
    elif scenario.sample_data is not None:
        result.notes.append(f"{scenario.insert_count} sample rows not loaded (no database schema)")

    if db_path is not None and config.reset_twice:
        _reset_twice(scenario, config, pool, work_dir, clock, db_path, result)

    if scenario.env_code is not None and config.exercise_tools and db_path is not None:
        _exercise(scenario, config, pool, work_dir, clock, db_path, report, result)
    elif scenario.env_code is not None:
        app = AppWorker(
            config.sandbox, workdir=work_dir / "app", name=f"app {scenario.name}", clock=clock
        )
        try:
            openapi = app.load(scenario.env_code, db_path)
            result.tools = len(tools_from_openapi(openapi))
            if result.tools == 0:
                result.errors.append(f"{scenario.locations.get('env')}: the app exposes no tools")
            if db_path is None:
                result.notes.append("app started on an empty database (no schema)")
        except SandboxError as e:
            where = scenario.locations.get("env", FILES["env"])
            if e.kind == "syntax_error":
                result.defects.append(f"{where}: {e.message}")
            else:
                result.errors.append(f"{where}: app did not start: {e.message}")
        finally:
            app.close()

    _run_verifiers(scenario, config, pool, db_path, result)

    if result.errors or (result.defects and config.defects_fail):
        result.status = "failed"
    elif result.missing or result.defects:
        result.status = "partial"
    else:
        result.status = "ok"
    return result


def _reset_twice(scenario, config, pool, work_dir, clock, db_path, result) -> None:
    """Build the initial database again and compare its rows with the first build's
    (:func:`~collect.awm.verification.database_digest`, run in a sandboxed verifier
    worker): a world whose seed rows depend on the build (``random()``, a clock the world
    clock does not reach) gives each reset, and each member of a GRPO group, a different
    initial state."""
    try:
        again, _ = build_scenario_database(
            scenario, work_dir / "db-again", clock=clock, limits=config.sandbox
        )
    except SandboxError as e:
        result.errors.append(f"the second build of the database failed: {e.message}")
        return
    try:
        digests = [run_database_digest(pool, scenario, db_path, p) for p in (db_path, again)]
    except RuntimeError as e:
        result.errors.append(str(e))
        return
    if digests[0] != digests[1]:
        where = scenario.locations.get("sample") or FILES.get("sample", "gen_sample.jsonl")
        result.defects.append(
            f"{where}: the seed rows differ between two builds of the initial database "
            f"(digests {digests[0][:12]} and {digests[1][:12]}): every reset is another world"
        )


#: the answers the do-nothing check gives a code-mode verifier on the untouched database:
#: none, an empty one and an arbitrary one (a verifier that checks only that there is an
#: answer says complete to any of them); complete for any of them is a defect
DO_NOTHING_ANSWERS: tuple[str | None, ...] = (None, "", "Done.")

#: verifier statuses that are our runtime's failures (an error), not the data's (a defect)
_RUNTIME_STATUSES = ("timeout", "memory", "cpu", "crashed", "closed", "start_failed", "limit")


def _run_verifiers(
    scenario: Scenario, config: CheckConfig, pool: VerifierPool, db_path, result: ScenarioCheck
) -> None:
    """The do-nothing check: each task's verifiers on the untouched database (the initial
    database as the final one). A code-mode verifier must not say complete, with any of
    :data:`DO_NOTHING_ANSWERS` as the final answer; a SQL-mode one must return a dict."""
    runs = []
    if config.run_verifiers:
        runs.append(("code", scenario.verifiers))
    if config.run_sql_verifiers:
        runs.append(("sql", scenario.sql_verifiers))
    result.verifiers = len(scenario.verifiers)
    result.sql_verifiers = len(scenario.sql_verifiers)
    for mode, records in runs:
        if records and db_path is None:
            result.notes.append(f"{len(records)} {mode}-mode verifiers not run (no database)")
            continue
        for _idx, record in sorted(records.items()):
            if _do_nothing(scenario, record, mode, pool, db_path, result):
                if mode == "code":
                    result.verifiers_ok += 1
                else:
                    result.sql_verifiers_ok += 1


def _do_nothing(scenario, record, mode, pool, db_path, result: ScenarioCheck) -> bool:
    """Run one verifier on the untouched database (code mode: once per answer of
    :data:`DO_NOTHING_ANSWERS`); False after recording the error or defect found."""
    where = f"{record.location} (task {record.task_idx})"
    for answer, outcome in _untouched_runs(scenario, record, mode, pool, db_path):
        if outcome.status in _RUNTIME_STATUSES:
            result.errors.append(f"{where}: {outcome.message}")
            return False
        if not outcome.ok:
            if answer is not None:  # raising on an answer is not what this run looks for
                continue
            result.defects.append(_verifier_defect(record, outcome))
            return False
        if mode == "code" and outcome.label == "complete":
            given = "" if answer is None else f" with the final answer {answer!r}"
            result.defects.append(
                f"{where}: verifier says complete on the untouched database{given}"
            )
            return False
        if mode == "sql" and not isinstance(outcome.result, dict):
            result.defects.append(
                f"{where}: verify_task returned {type(outcome.result).__name__}, not a dict"
            )
            return False
    return True


def _untouched_runs(scenario, record, mode, pool, db_path):
    """``(answer, outcome)`` of one verifier's runs on the untouched database, one per
    answer of :data:`DO_NOTHING_ANSWERS` (code mode; SQL mode: one, without an answer),
    each run as it is asked for (a caller that stops early runs no more)."""
    for answer in DO_NOTHING_ANSWERS if mode == "code" else (None,):
        yield (
            answer,
            pool.run(
                record.code,
                initial_db=db_path,
                final_db=db_path,
                final_answer=answer,
                mode=mode,
                function_name=record.function_name,
                world=verifier_world(scenario),
            ),
        )


def passes_untouched(scenario: Scenario, record, pool: VerifierPool, db_path: Path) -> str | None:
    """The do-nothing check of one code-mode verifier as the collector asks it (a task
    the agent completes by doing nothing): what it was given when it said complete on the
    untouched database (``no final answer``, ``the final answer 'Done.'``), None when it
    said so for none of :data:`DO_NOTHING_ANSWERS`. A verifier that raises, or a run our
    runtime could not finish (the remaining answers are not tried), is not this finding:
    None (``python -m collect.awm.check`` reports those)."""
    for answer, outcome in _untouched_runs(scenario, record, "code", pool, db_path):
        if outcome.status in _RUNTIME_STATUSES:
            return None
        if outcome.ok and outcome.label == "complete":
            return "no final answer" if answer is None else f"the final answer {answer!r}"
    return None


def _read_only_calls(scenario: Scenario, tools: list[Tool]) -> list[tuple[str, dict]]:
    """One call per read-only (GET) tool: no arguments when it needs none, else those of the
    first reference solution that calls it; tools with neither are skipped."""
    known: dict[str, dict] = {}
    for _idx, solution in sorted(scenario.solutions.items()):
        for call in solution.calls:
            if isinstance(call.get("arguments"), dict):
                known.setdefault(str(call.get("tool_name")), call["arguments"])
    calls = []
    for tool in tools:
        if tool.method != "GET":
            continue
        required = (tool.input_schema or {}).get("required") or []
        if tool.name in known:
            calls.append((tool.name, known[tool.name]))
        elif not required:
            calls.append((tool.name, {}))
    return calls


def _exercise(scenario, config, pool, work_dir, clock, db_path, report, result) -> None:
    """Start the app as an episode would (:class:`AWMEnv`, same sandbox and budgets) and call
    each read-only tool once; a worker death, timeout or limit is an error, a 5xx a defect."""
    where = scenario.locations.get("env", FILES["env"])
    env_config = EnvConfig(
        sandbox=config.sandbox,
        verifier_sandbox=config.verifier_sandbox,
        tool_budget_s=config.tool_budget_s,
        fresh_app=False,
    )
    try:
        env = AWMEnv(
            scenario,
            env_config,
            verifier_pool=pool,
            initial_db=db_path,
            build_report=report,
            work_root=work_dir / "env",
            clock=clock,
        )
    except ValueError as e:  # no tasks: started and listed only
        result.notes.append(f"tools not exercised: {e}")
        return
    try:
        try:
            env.reset(0)
        except SandboxError as e:
            if e.kind == "syntax_error":
                result.defects.append(f"{where}: {e.message}")
            else:
                result.errors.append(f"{where}: app did not start: {e.message}")
            return
        result.tools = len(env.tools)
        if result.tools == 0:
            result.errors.append(f"{where}: the app exposes no tools")
        started = time.monotonic()
        for name, args in _read_only_calls(scenario, env.tools):
            call = env.call_tool(name, args)
            result.tool_calls += 1
            if call.fatal:
                result.tool_failures += 1
                result.errors.append(f"{where}: tool {name} killed its worker: {call.text[:300]}")
                break
            if call.status is not None and call.status >= 500:
                result.tool_failures += 1
                result.defects.append(f"{where}: tool {name}: {call.text[:300]}")
        result.tool_seconds = time.monotonic() - started
        if env.app is not None:
            result.app_cpu_seconds = env.app.worker.cpu_seconds_used()
            try:  # what a verification needs next: an export of the app's database
                env.app.export("check-export.db").unlink(missing_ok=True)
            except SandboxError as e:
                result.errors.append(f"{where}: after the calls, {e.message}")
    finally:
        env.close()


@dataclass
class CheckReport:
    data: Path
    scenarios: list[ScenarioCheck]
    dataset_problems: list[str]

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "partial": 0, "failed": 0}
        for s in self.scenarios:
            out[s.status] += 1
        return out

    def summary(self) -> str:
        c = self.counts()
        return f"checked {len(self.scenarios)} scenarios: {c['ok']} ok, {c['partial']} partial, {c['failed']} failed"

    def exit_code(self, defects_fail: bool = True) -> int:
        failed = self.counts()["failed"] > 0
        return 1 if failed or (defects_fail and self.dataset_problems) else 0


def check_dataset(config: CheckConfig, out: TextIO | None = None) -> CheckReport:
    """Check every (selected) scenario; prints one line per scenario to ``out`` as it goes."""
    data = Path(config.data) if config.data else WORLDS_DIR
    dataset = AWMDataset(data)
    names = dataset.names()
    if config.scenarios:
        wanted = set(config.scenarios)
        names = [n for n in names if n in wanted]
    dataset_problems = [str(p) for p in dataset.problems if p.scenario is None]
    root = default_work_root()
    clock = dataset.clock(config.clock)
    pool = VerifierPool(
        max(1, config.jobs), config.verifier_sandbox, work_root=root / "verify", clock=clock
    )
    results: list[ScenarioCheck] = []

    def one(item: tuple[int, str]) -> ScenarioCheck:
        i, name = item
        try:
            scenario = dataset.get(name)
            return check_scenario(scenario, config, pool, root / f"s{i}", clock)
        except Exception as e:  # noqa: BLE001 - a bug or I/O error must not hide other scenarios
            return ScenarioCheck(name, status="failed", errors=[f"check crashed: {e!r}"])
        finally:
            remove_tree(root / f"s{i}")  # iterative: a world's deep tree cannot make this raise

    try:
        for problem in dataset_problems:
            _print(out, f"defect  {problem}")
        with ThreadPoolExecutor(max_workers=max(1, config.jobs)) as executor:
            for result in executor.map(one, enumerate(names)):
                results.append(result)
                _print(out, result.line())
                for note in result.notes:
                    _print(out, f"    note: {note}")
                for err in result.errors:
                    _print(out, f"    error: {err}")
                shown = result.defects[: config.max_defects_shown]
                for defect in shown:
                    _print(out, f"    defect: {defect}")
                if len(result.defects) > len(shown):
                    _print(out, f"    ... {len(result.defects) - len(shown)} more defects")
    finally:
        pool.close()
        remove_tree(root)
    report = CheckReport(data, results, dataset_problems)
    _print(out, report.summary())
    return report


def _print(out: TextIO | None, text: str) -> None:
    if out is not None:
        print(text, file=out, flush=True)


def _nothing_to_check(config: CheckConfig) -> str | None:
    """Why there is nothing to check (an empty directory is an error, not a pass)."""
    data = Path(config.data) if config.data else WORLDS_DIR
    if not data.is_dir():
        return f"AWM data directory not found: {data}"
    names = AWMDataset(data).names()
    if not names:
        files = ", ".join(sorted(set(FILES.values()))[:3])
        return f"data={data}: no scenario found (no records in {files}, ...): nothing to check"
    missing = [n for n in config.scenarios if n not in names]
    if config.scenarios and len(missing) == len(config.scenarios):
        return f"scenarios={config.scenarios}: none of them is in data={data}"
    return None


def run_check(config: CheckConfig, out: TextIO | None = sys.stdout) -> int:
    """Check, print, and return the exit status (1 if any scenario failed)."""
    try:
        check_isolation(config.sandbox)
        check_isolation(config.verifier_sandbox)
    except SandboxError as e:  # no dataset code runs with less isolation than asked for
        _print(sys.stderr if out is not None else None, f"collect.awm.check: {e.message}")
        return 2
    problem = _nothing_to_check(config)
    if problem is not None:
        _print(sys.stderr if out is not None else None, f"collect.awm.check: error: {problem}")
        return 2
    report = check_dataset(config, out)
    return report.exit_code(config.defects_fail)


def main() -> None:
    """``python -m collect.awm.check``: exits with :func:`run_check`'s status."""
    run_app(
        "collect.awm.check",
        CheckConfig,
        run_check,
        config_name="check",
        errors=COMMAND_ERRORS,
    )


if __name__ == "__main__":
    main()
