"""Loading Agent World Model (AWM) datasets: files, normalization, per-scenario assembly.

An AWM directory holds JSON Lines files, joined on the scenario name (never on
line numbers)::

    gen_scenario.jsonl            {name, description}
    gen_tasks.jsonl               {scenario, tasks: [str, ...]}
    gen_db.jsonl                  {scenario, db_schema: {tables: [{name, ddl, indexes, examples?}]}}
    gen_sample.jsonl              {scenario, sample_data: {tables: [{table_name, insert_statements}]}}
    gen_spec.jsonl (optional)     {scenario, api_spec}
    gen_envs.jsonl                {scenario, db_path, full_code}
    gen_verifier.pure_code.jsonl  {scenario, task_idx, task, verification: {code}}  (code mode)
    gen_verifier.jsonl            {scenario, task_idx, task, verification: {code}}  (SQL mode)
    gen_solutions.jsonl (ours)    {scenario, task_idx, calls: [{tool_name, arguments}], final_answer?}

:class:`AWMDataset` indexes every file once (byte offsets, so the 500 MB of the
full dataset are not held in memory) and assembles a :class:`Scenario` on
demand. Scenario names are normalized to ``[a-z0-9_]`` as AWM does; the first
record of a (scenario[, task_idx]) key wins and later duplicates are reported.
Fields that arrive as JSON or Python-literal strings are decoded. Every record
keeps its :class:`Location` (file and line) so problems can be reported there.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from collect.awm.clock import WorldClock
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    import threading

__all__ = [
    "CORE_PIECES",
    "FILES",
    "AWMDataset",
    "LoadProblem",
    "Location",
    "Scenario",
    "Solution",
    "Task",
    "VerifierRecord",
    "normalize_scenario_name",
]

#: piece name -> file name
FILES: dict[str, str] = {
    "description": "gen_scenario.jsonl",
    "tasks": "gen_tasks.jsonl",
    "db": "gen_db.jsonl",
    "sample": "gen_sample.jsonl",
    "spec": "gen_spec.jsonl",
    "env": "gen_envs.jsonl",
    "verifiers": "gen_verifier.pure_code.jsonl",
    "sql_verifiers": "gen_verifier.jsonl",
    "solutions": "gen_solutions.jsonl",
}
#: pieces an episode needs to run (the default of ``collect.awm.check``'s ``required``)
CORE_PIECES: tuple[str, ...] = ("tasks", "db", "sample", "env")
_PER_TASK = ("verifiers", "sql_verifiers", "solutions")


def normalize_scenario_name(name: str) -> str:
    """AWM's normalization: lower case, ``[^a-z0-9_]`` -> ``_``, no repeated/edge ``_``."""
    s = re.sub(r"[^a-z0-9_]", "_", str(name).lower())
    return re.sub(r"_+", "_", s).strip("_")


@dataclass(frozen=True)
class Location:
    """Where a record came from: file name and 1-based line number."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class LoadProblem:
    """A record that could not be used as-is (malformed line, duplicate, bad field)."""

    location: Location
    message: str
    scenario: str | None = None

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


@dataclass
class VerifierRecord:
    """One task's verifier; ``mode`` is ``code`` (complete/others) or ``sql`` (judge input)."""

    scenario: str
    task_idx: int
    task: str | None
    code: str
    mode: str
    location: Location

    @property
    def function_name(self) -> str:
        """The ``def verify...`` the code defines (AWM's defaults when none is found)."""
        match = re.search(r"^def\s+(verify\w*)\s*\(", self.code, re.M)
        if match:
            return match.group(1)
        return "verify_task_completion" if self.mode == "code" else "verify_task"


@dataclass
class Solution:
    """A reference solution: tool calls in order and an optional final answer."""

    scenario: str
    task_idx: int
    calls: list[dict[str, JSON]]
    final_answer: str | None
    location: Location


@dataclass(frozen=True)
class Task:
    scenario: str
    idx: int
    text: str


@dataclass
class Scenario:
    """Everything the dataset holds for one scenario (``None``/empty where absent)."""

    name: str
    description: str | None = None
    tasks: list[str] | None = None
    db_schema: dict[str, JSON] | None = None
    sample_data: dict[str, JSON] | None = None
    api_spec: JSON = None
    env_code: str | None = None
    db_path_hint: str | None = None
    verifiers: dict[int, VerifierRecord] = field(default_factory=dict)
    sql_verifiers: dict[int, VerifierRecord] = field(default_factory=dict)
    solutions: dict[int, Solution] = field(default_factory=dict)
    locations: dict[str, Location] = field(default_factory=dict)
    problems: list[LoadProblem] = field(default_factory=list)

    def has(self, piece: str) -> bool:
        value = {
            "description": self.description,
            "tasks": self.tasks,
            "db": self.db_schema,
            "sample": self.sample_data,
            "spec": self.api_spec,
            "env": self.env_code,
            "verifiers": self.verifiers or None,
            "sql_verifiers": self.sql_verifiers or None,
            "solutions": self.solutions or None,
        }[piece]
        return value is not None

    def missing(self, pieces: tuple[str, ...] | list[str] = CORE_PIECES) -> list[str]:
        return [p for p in pieces if not self.has(p)]

    def task(self, idx: int) -> Task:
        if not self.tasks or not 0 <= idx < len(self.tasks):
            n = len(self.tasks or [])
            raise IndexError(f"{self.name}: no task {idx} ({n} tasks)")
        return Task(self.name, idx, self.tasks[idx])

    @property
    def n_tasks(self) -> int:
        return len(self.tasks or [])

    @property
    def insert_count(self) -> int:
        return sum(
            len(t.get("insert_statements") or [])
            for t in (self.sample_data or {}).get("tables", [])
            if isinstance(t, dict)
        )


# ---------------------------------------------------------------------------
# decoding helpers (pure)
# ---------------------------------------------------------------------------


def decode_field(value: JSON, expected: type | tuple[type, ...]) -> JSON:
    """Return ``value`` as ``expected``, decoding JSON or Python-literal strings.

    Raises ValueError when the value cannot be read as the expected type.
    """
    if isinstance(value, expected):
        return value
    if isinstance(value, str):
        text = value.strip()
        for parse in (json.loads, ast.literal_eval):
            try:
                decoded = parse(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(decoded, expected):
                return decoded
    names = (
        expected.__name__ if isinstance(expected, type) else "/".join(t.__name__ for t in expected)
    )
    raise ValueError(f"expected {names}, got {type(value).__name__}")


def _verification_code(record: dict[str, JSON]) -> str:
    ver = record.get("verification")
    if isinstance(ver, str):
        try:
            ver = decode_field(ver, dict)
        except ValueError:
            return ver
    if isinstance(ver, dict):
        code = ver.get("code")
        if isinstance(code, str):
            return code
    code = record.get("code")
    if isinstance(code, str):
        return code
    raise ValueError("no verification.code string")


# ---------------------------------------------------------------------------
# dataset
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ref:
    piece: str
    offset: int
    length: int
    line: int


class AWMDataset:
    """An AWM-format directory, indexed by scenario.

    >>> ds = AWMDataset("path/to/dir")
    >>> ds.names()            # every scenario named in any file
    >>> sc = ds.get("content_platform_1")
    >>> sc.missing()           # core pieces absent from the files
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"AWM data directory not found: {self.root}")
        self.files_present = {p for p, f in FILES.items() if (self.root / f).is_file()}
        self.problems: list[LoadProblem] = []
        self._refs: dict[str, dict[str, JSON]] = {}
        self._order: list[str] = []
        for piece in FILES:
            if piece in self.files_present:
                self._index(piece)

    # -- indexing ------------------------------------------------------------

    def clock(self, spec: WorldClock | str | None = None) -> WorldClock:
        """The world clock for ``clock=spec`` (unset: this dataset's ``clock.txt`` or the
        fixed default; see :mod:`collect.awm.clock`)."""
        return WorldClock.resolve(spec, self.root)

    def _index(self, piece: str) -> None:
        fname = FILES[piece]
        offset = 0
        with open(self.root / fname, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                start, offset = offset, offset + len(raw)
                if not raw.strip():
                    continue
                loc = Location(fname, lineno)
                try:
                    record = json.loads(raw)
                except ValueError as e:
                    self.problems.append(LoadProblem(loc, f"not valid JSON: {e}"))
                    continue
                if not isinstance(record, dict):
                    self.problems.append(LoadProblem(loc, "record is not a JSON object"))
                    continue
                key_field = "name" if piece == "description" else "scenario"
                raw_name = record.get(key_field, record.get("scenario", record.get("name")))
                if not isinstance(raw_name, str) or not normalize_scenario_name(raw_name):
                    self.problems.append(LoadProblem(loc, f"record has no '{key_field}'"))
                    continue
                name = normalize_scenario_name(raw_name)
                ref = _Ref(piece, start, len(raw), lineno)
                slot = self._refs.get(name)
                if slot is None:
                    slot = self._refs[name] = {}
                    self._order.append(name)
                if piece in _PER_TASK:
                    try:
                        idx = int(record.get("task_idx"))
                    except (TypeError, ValueError):
                        self.problems.append(
                            LoadProblem(loc, "record has no integer task_idx", name)
                        )
                        continue
                    per_task = slot.setdefault(piece, {})
                    if idx in per_task:
                        first = per_task[idx].line
                        self.problems.append(
                            LoadProblem(loc, f"duplicate task {idx} (line {first} is used)", name)
                        )
                        continue
                    per_task[idx] = ref
                elif piece in slot:
                    first = slot[piece].line
                    self.problems.append(
                        LoadProblem(loc, f"duplicate record (line {first} is used)", name)
                    )
                else:
                    slot[piece] = ref

    def _read(self, ref: _Ref) -> dict[str, JSON]:
        with open(self.root / FILES[ref.piece], "rb") as fh:
            fh.seek(ref.offset)
            return json.loads(fh.read(ref.length))

    # -- access ----------------------------------------------------------------
    def names(self) -> list[str]:
        """Scenario names in order of first appearance (files in :data:`FILES` order)."""
        return list(self._order)

    def task_pool(self) -> list[str]:
        """The id (``scenario/idx``) of every task of every scenario, runnable or not: what
        the train/validation/test split ranks (``collect.schedule.split_tasks``), so that a
        task's split never depends on which tasks a collection or a training run selects."""
        return [f"{n}/{i}" for n in self._order for i in range(self.get(n).n_tasks)]

    def __contains__(self, name: str) -> bool:
        return normalize_scenario_name(name) in self._refs

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[Scenario]:
        for name in self._order:
            yield self.get(name)

    def pieces(self, name: str) -> set[str]:
        """Pieces with a record for ``name`` (cheap: from the index)."""
        return set(self._refs.get(normalize_scenario_name(name), {}))

    def get(self, name: str) -> Scenario:
        """Assemble one scenario; problems with its fields land in ``scenario.problems``."""
        key = normalize_scenario_name(name)
        slot = self._refs.get(key)
        if slot is None:
            raise KeyError(f"scenario {name!r} not in {self.root}")
        sc = Scenario(name=key)
        for piece, ref in slot.items():
            if piece in _PER_TASK:
                for idx, tref in sorted(ref.items()):
                    self._load_task_piece(sc, piece, idx, tref)
            else:
                self._load_piece(sc, piece, ref)
        if sc.tasks is not None:
            for group in (sc.verifiers, sc.sql_verifiers):
                for idx, ver in group.items():
                    if idx >= len(sc.tasks):
                        sc.problems.append(
                            LoadProblem(ver.location, f"task_idx {idx} has no task", key)
                        )
                    elif ver.task is not None and ver.task.strip() != sc.tasks[idx].strip():
                        sc.problems.append(
                            LoadProblem(ver.location, f"task text differs from task {idx}", key)
                        )
        return sc

    def _load_piece(self, sc: Scenario, piece: str, ref: _Ref) -> None:
        loc = Location(FILES[piece], ref.line)
        record = self._read(ref)
        try:
            if piece == "description":
                sc.description = str(record.get("description") or "")
            elif piece == "tasks":
                tasks = decode_field(record.get("tasks"), list)
                if not all(isinstance(t, str) for t in tasks):
                    raise ValueError("tasks must be strings")
                sc.tasks = list(tasks)
            elif piece == "db":
                schema = decode_field(record.get("db_schema"), dict)
                if not isinstance(schema.get("tables"), list):
                    raise ValueError("db_schema has no 'tables' list")
                sc.db_schema = schema
                sc.db_path_hint = record.get("db_path")
            elif piece == "sample":
                data = decode_field(record.get("sample_data"), dict)
                if not isinstance(data.get("tables"), list):
                    raise ValueError("sample_data has no 'tables' list")
                sc.sample_data = data
            elif piece == "spec":
                sc.api_spec = record.get("api_spec")
            elif piece == "env":
                code = record.get("full_code")
                if not isinstance(code, str) or not code.strip():
                    raise ValueError("full_code is not a non-empty string")
                sc.env_code = code
                sc.db_path_hint = sc.db_path_hint or record.get("db_path")
        except ValueError as e:
            sc.problems.append(LoadProblem(loc, f"{piece}: {e}", sc.name))
            return
        sc.locations[piece] = loc

    def _load_task_piece(self, sc: Scenario, piece: str, idx: int, ref: _Ref) -> None:
        loc = Location(FILES[piece], ref.line)
        record = self._read(ref)
        try:
            if piece == "solutions":
                calls = decode_field(record.get("calls") or [], list)
                answer = record.get("final_answer")
                sc.solutions[idx] = Solution(
                    sc.name, idx, calls, None if answer is None else str(answer), loc
                )
            else:
                code = _verification_code(record)
                task = record.get("task")
                mode = "code" if piece == "verifiers" else "sql"
                target = sc.verifiers if mode == "code" else sc.sql_verifiers
                target[idx] = VerifierRecord(
                    sc.name, idx, task if isinstance(task, str) else None, code, mode, loc
                )
        except ValueError as e:
            sc.problems.append(LoadProblem(loc, f"{piece} task {idx}: {e}", sc.name))


class ServedScenarios:
    """The scenarios a pool of environments serves, each loaded once: a base of the local
    and the remote pools (``collect.awm.env.EnvPool``, ``collect.awm.remote_env.OpenEnvPool``),
    which set ``dataset``, ``allowed`` (None: every scenario of the dataset), ``_scenarios``
    (the cache) and ``_lock``."""

    dataset: AWMDataset
    allowed: set[str] | None
    _scenarios: dict[str, Scenario]
    _lock: threading.Lock

    def names(self) -> list[str]:
        return [n for n in self.dataset.names() if self.allowed is None or n in self.allowed]

    def scenario(self, name: str) -> Scenario:
        with self._lock:
            if self.allowed is not None and name not in self.allowed:
                raise KeyError(f"scenario {name!r} is not served")
            if name not in self._scenarios:
                self._scenarios[name] = self.dataset.get(name)
            return self._scenarios[name]
