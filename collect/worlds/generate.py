"""``python -m collect.worlds.generate out=DIR n=N seed=S``: seeded AWM-format worlds.

Writes ``n`` worlds (cycling through the eight domain families of
:mod:`collect.worlds.gen.families`, or ``families=[...]``) in the files the loader reads
(``gen_scenario.jsonl``, ``gen_tasks.jsonl``, ``gen_db.jsonl``, ``gen_sample.jsonl``,
``gen_envs.jsonl``, ``gen_verifier.pure_code.jsonl``), the reference solutions
(``gen_solutions.jsonl``) and the worlds' clock (``clock.txt``), then prints statistics
of the set. The same arguments always give byte-identical files. The worlds are a test
bed for the runtime and the collector, not a substitute for AWM-1K; check them with
``python -m collect.awm.check data=DIR``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from collect.worlds.build import FILES, db_path
from collect.worlds.gen.appcode import app_code, ddl
from collect.worlds.gen.draw import CLOCK, columns, draw_world, tool_count
from collect.worlds.gen.families import FAMILY_KEYS, family
from collect.worlds.gen.tasks import build_tasks
from collect.worlds.gen.verifier import verifier_code
from collect.worlds.src.common import insert_statement
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app

__all__ = ["GenerateConfig", "generate", "render", "stats_table", "world_records"]


@dataclass
class GenerateConfig:
    """``python -m collect.worlds.generate``: write seeded worlds in the AWM format."""

    out: str = _f("???", "directory to write the gen_*.jsonl files and clock.txt into")
    n: int = _f(8, "number of worlds (world i has family i mod the number of families)")
    seed: int = _f(0, "seed of the set: the same (n, seed, families) give the same bytes")
    families: list[str] = _f(
        [], f"families to cycle through; empty: all ({', '.join(FAMILY_KEYS)})"
    )


def _description(world: dict) -> str:
    ents = [e for e in world["entities"]]
    names = ", ".join(e["plural_label"] for e in ents)
    item = next(e for e in ents if e["role"] == "item")
    st = item["state"]
    return (
        f"{world['app']} is {world['what']}. It keeps {names}. "
        f"Each {item['label']} moves through the {st['col']} values {', '.join(st['states'])} "
        f"by dedicated actions; records are listed with filters and pagination, created, "
        f"updated and deleted through the API. (Generated world, family {world['family']}.)"
    )


def world_records(world: dict) -> dict[str, list[dict]]:
    """The records of one drawn world, per file (``FILES`` of :mod:`collect.worlds.build`)."""
    scenario = world["scenario"]
    tasks = build_tasks(world)  # shapes the seed rows: before they are rendered
    out: dict[str, list[dict]] = {name: [] for name in FILES}
    out["gen_scenario.jsonl"].append({"name": scenario, "description": _description(world)})
    out["gen_tasks.jsonl"].append({"scenario": scenario, "tasks": [t["task"] for t in tasks]})
    out["gen_db.jsonl"].append(
        {"scenario": scenario, "db_schema": {"tables": ddl(world)}, "db_path": db_path(scenario)}
    )
    sample = []
    for ent in world["entities"]:
        cols = columns(ent)
        inserts = [
            insert_statement(ent["plural"], cols, tuple(r.get(c) for c in cols))
            for r in ent["rows"]
        ]
        sample.append(
            {
                "table_name": ent["plural"],
                "reasoning": f"{len(inserts)} seed {ent['plural_label']} drawn for the {world['family']} family",
                "insert_statements": inserts,
            }
        )
    out["gen_sample.jsonl"].append(
        {
            "scenario": scenario,
            "tables_count": len(sample),
            "inserts_count": sum(len(t["insert_statements"]) for t in sample),
            "sample_data": {"tables": sample},
        }
    )
    out["gen_envs.jsonl"].append(
        {"scenario": scenario, "db_path": db_path(scenario), "full_code": app_code(world)}
    )
    for idx, t in enumerate(tasks):
        out["gen_verifier.pure_code.jsonl"].append(
            {
                "scenario": scenario,
                "task_idx": idx,
                "task": t["task"],
                "verification": {"code": verifier_code(t["expect"]), "raw_response": ""},
            }
        )
        sol = {"scenario": scenario, "task_idx": idx, "calls": t["calls"]}
        if t["final_answer"] is not None:
            sol["final_answer"] = t["final_answer"]
        out["gen_solutions.jsonl"].append(sol)
    return out


def worlds(n: int, seed: int, families: list[str] | None = None) -> list[dict]:
    keys = list(families or FAMILY_KEYS)
    fams = [family(k) for k in keys]  # an unknown family: KeyError naming the known ones
    if n < 1:
        raise ValueError(f"n={n}: give at least one world")
    return [draw_world(fams[i % len(fams)], seed, i) for i in range(n)]


def render(
    n: int, seed: int, families: list[str] | None = None
) -> tuple[dict[str, str], list[dict]]:
    """File name -> content of every file, and one statistics row per world."""
    merged: dict[str, list[dict]] = {name: [] for name in FILES}
    stats = []
    for world in worlds(n, seed, families):
        records = world_records(world)
        for name, recs in records.items():
            merged[name].extend(recs)
        stats.append(
            {
                "scenario": world["scenario"],
                "tools": tool_count(world),
                "tables": len(world["entities"]),
                "columns": sum(len(columns(e)) for e in world["entities"]),
                "rows": sum(len(e["rows"]) for e in world["entities"]),
                "calls": [len(s["calls"]) for s in records["gen_solutions.jsonl"]],
            }
        )
    files = {
        name: "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in recs)
        for name, recs in merged.items()
    }
    files["clock.txt"] = CLOCK + "\n"
    return files, stats


def _spread(values: list[float]) -> str:
    mean = sum(values) / len(values)
    return f"{mean:.1f} ({min(values)}-{max(values)})"


#: AWM-1K's published figures (its dataset card and OpenEnv's AWM page: 1,000 environments,
#: 10,000 tasks); None: a figure we found no published value for - never guessed
AWM_1K = {"worlds": "1,000", "tasks": "10,000", "tools": None, "tables": None, "columns": None, "rows": None, "calls": None}  # fmt: skip


def stats_table(stats: list[dict]) -> str:
    """A Markdown table of the set's statistics beside AWM-1K's published ones."""
    calls = [c for s in stats for c in s["calls"]]
    ours = {
        "worlds": str(len(stats)),
        "tasks": str(len(calls)),
        "tools": _spread([s["tools"] for s in stats]),
        "tables": _spread([s["tables"] for s in stats]),
        "columns": _spread([s["columns"] for s in stats]),
        "rows": _spread([s["rows"] for s in stats]),
        "calls": _spread(calls),
    }
    label = {
        "worlds": "worlds",
        "tasks": "tasks",
        "tools": "tools per world, mean (min-max)",
        "tables": "tables per world",
        "columns": "columns per world (schema size)",
        "rows": "seed rows per world",
        "calls": "calls per reference solution",
    }
    lines = ["| | generated | AWM-1K |", "|---|---|---|"]
    for key, text in label.items():
        lines.append(f"| {text} | {ours[key]} | {AWM_1K[key] or 'not published'} |")
    return "\n".join(lines)


def generate(config: GenerateConfig, out: TextIO | None = sys.stdout) -> int:
    files, stats = render(config.n, config.seed, config.families)
    root = Path(config.out)
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_bytes(text.encode("utf-8"))
    if out is not None:
        for s in stats:
            print(
                f"{s['scenario']}: {s['tools']} tools, {s['tables']} tables, {s['rows']} rows, calls {s['calls']}",
                file=out,
            )
        print(stats_table(stats), file=out)
        print(
            f"wrote {len(stats)} worlds to {root} (check: python -m collect.awm.check data={root})",
            file=out,
        )
    return 0


def main() -> None:
    run_app("collect.worlds.generate", GenerateConfig, generate, config_name="generate")


if __name__ == "__main__":
    main()
