"""Regenerate the AWM-format JSONL files of the demo worlds from ``src/``.

Usage::

    python -m collect.worlds.build            # rewrite collect/worlds/gen_*.jsonl
    python -m collect.worlds.build --out DIR  # write them somewhere else
    python -m collect.worlds.build --check    # exit 1 if the shipped files are stale

The output is deterministic: the same sources always give byte-identical files
(UTF-8, one JSON record per line, trailing newline).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pathlib
import sys
import textwrap

from collect.worlds import SCENARIOS, WORLDS_DIR
from collect.worlds.src.common import insert_statement

SRC_DIR = WORLDS_DIR / "src"

FILES = (
    "gen_scenario.jsonl",
    "gen_tasks.jsonl",
    "gen_db.jsonl",
    "gen_sample.jsonl",
    "gen_envs.jsonl",
    "gen_verifier.pure_code.jsonl",
    "gen_solutions.jsonl",
)

VERIFIER_NAME = "verify_task_completion"


def db_path(scenario: str) -> str:
    return f"./outputs/databases/{scenario}.db"


def verifier_code(fn) -> str:
    """Source of a verifier function, renamed to ``verify_task_completion``."""
    src = textwrap.dedent(inspect.getsource(fn))
    head = f"def {fn.__name__}("
    if not src.startswith(head):
        raise ValueError(f"{fn.__name__}: verifier source must start with {head!r}")
    return f"def {VERIFIER_NAME}(" + src[len(head) :].rstrip("\n") + "\n"


def load(scenario: str):
    pkg = f"collect.worlds.src.{scenario}"
    schema = importlib.import_module(f"{pkg}.schema")
    data = importlib.import_module(f"{pkg}.data")
    tasks = importlib.import_module(f"{pkg}.tasks")
    full_code = (SRC_DIR / scenario / "app.py").read_text(encoding="utf-8")
    return schema, data, tasks, full_code


def scenario_records(scenario: str) -> dict[str, list[dict]]:
    schema, data, tasks, full_code = load(scenario)
    if tasks.SCENARIO != scenario:
        raise ValueError(f"{scenario}: tasks.SCENARIO is {tasks.SCENARIO!r}")
    if len(tasks.TASKS) != 10:
        raise ValueError(f"{scenario}: expected 10 tasks, got {len(tasks.TASKS)}")
    table_names = [t["name"] for t in schema.TABLES]
    sample_tables = []
    for t in data.TABLES:
        if t["table_name"] not in table_names:
            raise ValueError(f"{scenario}: data for unknown table {t['table_name']}")
        sample_tables.append(
            {
                "table_name": t["table_name"],
                "reasoning": t["reasoning"],
                "insert_statements": [
                    insert_statement(t["table_name"], t["columns"], row) for row in t["rows"]
                ],
            }
        )
    n_inserts = sum(len(t["insert_statements"]) for t in sample_tables)
    out: dict[str, list[dict]] = {name: [] for name in FILES}
    out["gen_scenario.jsonl"].append({"name": scenario, "description": tasks.DESCRIPTION})
    out["gen_tasks.jsonl"].append({"scenario": scenario, "tasks": [t["task"] for t in tasks.TASKS]})
    out["gen_db.jsonl"].append(
        {
            "scenario": scenario,
            "db_schema": {
                "tables": [
                    {"name": t["name"], "ddl": t["ddl"], "indexes": list(t["indexes"])}
                    for t in schema.TABLES
                ]
            },
            "db_path": db_path(scenario),
        }
    )
    out["gen_sample.jsonl"].append(
        {
            "scenario": scenario,
            "tables_count": len(sample_tables),
            "inserts_count": n_inserts,
            "sample_data": {"tables": sample_tables},
        }
    )
    out["gen_envs.jsonl"].append(
        {"scenario": scenario, "db_path": db_path(scenario), "full_code": full_code}
    )
    for idx, t in enumerate(tasks.TASKS):
        out["gen_verifier.pure_code.jsonl"].append(
            {
                "scenario": scenario,
                "task_idx": idx,
                "task": t["task"],
                "verification": {"code": verifier_code(t["verifier"]), "raw_response": ""},
            }
        )
        sol = {"scenario": scenario, "task_idx": idx, "calls": t["calls"]}
        if t.get("final_answer") is not None:
            sol["final_answer"] = t["final_answer"]
        out["gen_solutions.jsonl"].append(sol)
    return out


def render_all() -> dict[str, str]:
    """File name -> file content for every shipped JSONL file."""
    merged: dict[str, list[dict]] = {name: [] for name in FILES}
    for scenario in SCENARIOS:
        for name, records in scenario_records(scenario).items():
            merged[name].extend(records)
    return {
        name: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        for name, records in merged.items()
    }


def write_all(out_dir: pathlib.Path | str = WORLDS_DIR) -> list[pathlib.Path]:
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_all().items():
        path = out_dir / name
        path.write_bytes(text.encode("utf-8"))
        written.append(path)
    return written


def stale_files(out_dir: pathlib.Path | str = WORLDS_DIR) -> list[str]:
    out_dir = pathlib.Path(out_dir)
    stale = []
    for name, text in render_all().items():
        path = out_dir / name
        if not path.exists() or path.read_bytes() != text.encode("utf-8"):
            stale.append(name)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=WORLDS_DIR, help="output directory")
    parser.add_argument(
        "--check", action="store_true", help="only check that the files are up to date"
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.out)
        for name in stale:
            print(f"stale: {name}", file=sys.stderr)
        return 1 if stale else 0
    for path in write_all(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
