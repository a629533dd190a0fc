"""The seeded world generator (``python -m collect.worlds.generate``): the same arguments give
the same bytes; n=8 covers every family once with 25-45 tools and ten graded tasks; every
reference solution passes its verifier (through the HTTP routes here, and in the sandbox
through ``AWMEnv``), doing nothing, leaving out the last write, touching another row or
answering wrongly fails; ``collect.awm.check`` passes on the set."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
import subprocess
import sys
import types
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

from collect.awm.dataset import AWMDataset
from collect.worlds.build import FILES
from collect.worlds.gen.families import FAMILY_KEYS
from collect.worlds.generate import render

ROOT = Path(__file__).resolve().parent.parent
N, SEED = 8, 3


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    files, stats = render(N, SEED)
    root = tmp_path_factory.mktemp("generated")
    for name, text in files.items():
        (root / name).write_bytes(text.encode("utf-8"))
    return root, files, stats


def _records(files: dict, name: str) -> list[dict]:
    return [json.loads(line) for line in files[name].splitlines()]


def test_same_arguments_give_the_same_bytes_and_the_seed_matters(generated):
    _root, files, _stats = generated
    again, _ = render(N, SEED)
    assert again == files
    assert set(files) == {*FILES, "clock.txt"}
    other, _ = render(N, SEED + 1)
    assert other["gen_sample.jsonl"] != files["gen_sample.jsonl"]
    assert other["gen_tasks.jsonl"] != files["gen_tasks.jsonl"]
    # a world depends on its family, seed and index only, not on n
    fewer, _ = render(2, SEED)
    assert _records(fewer, "gen_envs.jsonl") == _records(files, "gen_envs.jsonl")[:2]


def test_the_pinned_benchmark_is_what_the_generator_writes():
    """The fixed benchmark of the real model's pilot and verdict (bench/real_pilot.sh):
    n=40 seed=0, pinned by file sha256 in collect/worlds/benchmarks/gen40-seed0.sha256; a
    change to the generator that moves it must say so (new pins, new benchmark name)."""
    import hashlib

    pins = ROOT / "collect" / "worlds" / "benchmarks" / "gen40-seed0.sha256"
    want = dict(reversed(line.split("  ")) for line in pins.read_text().splitlines())
    files, _stats = render(40, 0)
    assert set(want) == set(files)
    got = {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in files.items()}
    assert got == want


def test_the_command_writes_the_same_bytes_under_another_hash_seed(generated, tmp_path):
    _root, files, _stats = generated
    out = tmp_path / "worlds"
    env = {"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "collect.worlds.generate", f"out={out}", f"n={N}", f"seed={SEED}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for name, text in files.items():
        assert (out / name).read_bytes() == text.encode("utf-8"), name
    assert "| tools per world, mean (min-max) |" in proc.stdout
    assert f"wrote {N} worlds" in proc.stdout


def test_every_family_once_with_its_tables_and_tool_counts(generated):
    _root, files, stats = generated
    names = [r["name"] for r in _records(files, "gen_scenario.jsonl")]
    assert [n.rsplit("_gen_", 1)[0] for n in names] == FAMILY_KEYS
    assert len(set(FAMILY_KEYS)) == 8
    for s in stats:
        assert 25 <= s["tools"] <= 45, s
        assert 6 <= s["tables"] <= 8 and s["rows"] >= 50, s
    # the table names differ between families (entities are drawn from the family)
    tables = [
        tuple(t["name"] for t in r["db_schema"]["tables"]) for r in _records(files, "gen_db.jsonl")
    ]
    assert len(set(tables)) == N


def _build_db(path: Path, db: dict, sample: dict) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA foreign_keys=ON")
        for table in db["db_schema"]["tables"]:
            conn.execute(table["ddl"])
            for index in table["indexes"]:
                conn.execute(index)
        for table in sample["sample_data"]["tables"]:
            for stmt in table["insert_statements"]:
                conn.execute(stmt)
        conn.commit()
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def _load_app(code: str, db_file: Path, monkeypatch, tag: str):
    monkeypatch.setenv("DATABASE_PATH", f"sqlite:///{db_file}")
    name = f"_generated_world_{tag}"
    module = types.ModuleType(name)
    sys.modules[name] = module  # pydantic resolves the models' annotations there
    try:
        exec(compile(code, f"<{tag}/app.py>", "exec"), module.__dict__)
    finally:
        sys.modules.pop(name, None)
    return module


def _invoke(client: TestClient, route: APIRoute, arguments: dict):
    """Split flat (fastapi_mcp-style) arguments into path, query and JSON body."""
    args = dict(arguments)
    path_names = {p.alias for p in route.dependant.path_params}
    query_names = {p.alias for p in route.dependant.query_params}
    path = route.path.format(**{k: args.pop(k) for k in path_names})
    query = {k: args.pop(k) for k in list(args) if k in query_names}
    body = args if route.dependant.body_params else None
    assert body is not None or not args, (route.operation_id, args)
    (method,) = route.methods
    return client.request(method, path, params=query, json=body)


def _replay(client: TestClient, ops: dict, calls: list[dict]) -> None:
    for n, c in enumerate(calls):
        resp = _invoke(client, ops[c["tool_name"]], c["arguments"])
        assert 200 <= resp.status_code < 300, (n, c, resp.status_code, resp.text)


def _verify(code: str, initial: Path, final: Path, answer) -> str:
    ns: dict = {}
    exec(compile(code, "<verifier>", "exec"), ns)
    return ns["verify_task_completion"](str(initial), str(final), answer)["result"]


def _is_write(call: dict) -> bool:
    return not call["tool_name"].startswith(("list_", "get_"))


def test_reference_solutions_pass_and_everything_else_fails(generated, tmp_path, monkeypatch):
    _root, files, _stats = generated
    by = {f: {r.get("scenario", r.get("name")): r for r in _records(files, f)} for f in ("gen_db.jsonl", "gen_sample.jsonl", "gen_envs.jsonl")}  # fmt: skip
    verifiers = {
        (r["scenario"], r["task_idx"]): r for r in _records(files, "gen_verifier.pure_code.jsonl")
    }
    tasks = {r["scenario"]: r["tasks"] for r in _records(files, "gen_tasks.jsonl")}
    checked, apps = 0, {}
    with contextlib.ExitStack() as stack:
        for sol in _records(files, "gen_solutions.jsonl"):
            scenario, idx = sol["scenario"], sol["task_idx"]
            code = verifiers[(scenario, idx)]["verification"]["code"]
            assert verifiers[(scenario, idx)]["task"] == tasks[scenario][idx]
            initial = tmp_path / f"{scenario}.db"
            if not initial.exists():
                _build_db(initial, by["gen_db.jsonl"][scenario], by["gen_sample.jsonl"][scenario])
            answer = sol.get("final_answer")
            assert _verify(code, initial, initial, None) == "others", (scenario, idx, "untouched")
            # the reference solution, and the same with its last write left out
            writes = [i for i, c in enumerate(sol["calls"]) if _is_write(c)]
            runs = [("full", sol["calls"])]
            if writes:
                runs.append(
                    ("short", [sol["calls"][i] for i in writes[:-1]])
                )  # reads change nothing
            for kind, calls in runs:
                final = tmp_path / f"{scenario}-{idx}-{kind}.db"
                shutil.copy(initial, final)
                if scenario not in apps:  # one app and client per world, bound to each run's db
                    module = _load_app(
                        by["gen_envs.jsonl"][scenario]["full_code"], final, monkeypatch, scenario
                    )
                    ops = {r.operation_id: r for r in module.app.routes if isinstance(r, APIRoute)}
                    apps[scenario] = (module, stack.enter_context(TestClient(module.app)), ops)
                module, client, ops = apps[scenario]
                engine = create_engine(
                    f"sqlite:///{final}", connect_args={"check_same_thread": False}
                )
                module.SessionLocal = sessionmaker(bind=engine, autoflush=False, autocommit=False)
                _replay(client, ops, calls)
                engine.dispose()
                want = "complete" if kind == "full" else "others"
                assert _verify(code, initial, final, answer) == want, (scenario, idx, kind, calls)
            final = tmp_path / f"{scenario}-{idx}-full.db"
            if answer is not None:
                assert writes == []
                assert _verify(code, initial, final, None) == "others"
                assert _verify(code, initial, final, "I could not find it.") == "others"
                assert _verify(code, initial, final, f"The answer is {answer}.") == "complete"
            # one more change anywhere else (a log entry's text) is rejected
            conn = sqlite3.connect(final)
            child = by["gen_db.jsonl"][scenario]["db_schema"]["tables"][-1]["name"]
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({child})")]
            conn.execute(f"UPDATE {child} SET {cols[1]} = {cols[1]} || ' (edited)' WHERE id = 1")
            conn.commit()
            conn.close()
            assert _verify(code, initial, final, answer) == "others", (
                scenario,
                idx,
                "extra change",
            )
            checked += 1
    assert checked == N * 10


def test_tasks_are_graded_from_one_to_eight_calls(generated):
    _root, files, stats = generated
    for s in stats:
        assert s["calls"] == sorted(s["calls"]), s
        assert s["calls"][0] == 1 and s["calls"][-1] <= 8 and len(s["calls"]) == 10, s
        assert len(set(s["calls"])) >= 5, s
    texts = [t for r in _records(files, "gen_tasks.jsonl") for t in r["tasks"]]
    assert len(set(texts)) == len(texts) == N * 10
    answers = [s for s in _records(files, "gen_solutions.jsonl") if "final_answer" in s]
    assert len(answers) == 2 * N  # a count and a multi-hop look-up per world


def test_the_loader_reads_every_piece(generated):
    root, _files, _stats = generated
    ds = AWMDataset(root)
    assert ds.problems == []
    assert len(ds.names()) == N
    for sc in ds:
        assert (
            sc.missing(["description", "tasks", "db", "sample", "env", "verifiers", "solutions"])
            == []
        )
        assert sc.n_tasks == 10 and sorted(sc.solutions) == list(range(10))
        assert "create_engine(database_url, connect_args=" in sc.env_code
    assert ds.clock().source == "dataset"


@pytest.mark.slow
def test_check_passes_on_the_generated_set(generated):
    from collect.awm.check import CheckConfig, check_dataset

    root, _files, stats = generated
    out = io.StringIO()
    report = check_dataset(CheckConfig(data=str(root), jobs=2), out)
    assert report.counts() == {"ok": N, "partial": 0, "failed": 0}, out.getvalue()
    tools = {s["scenario"]: s["tools"] for s in stats}
    for s in report.scenarios:
        assert s.tools == tools[s.name] and s.verifiers_ok == 10 and s.tool_failures == 0
        assert s.rows_loaded == s.rows_total


@pytest.mark.slow
def test_reference_solutions_pass_in_the_sandbox(generated):
    from collect.awm.env import EnvPool
    from collect.awm.protocol import format_call_tool

    root, _files, _stats = generated
    pool = EnvPool(root)
    try:
        for name in pool.names()[:2]:
            scenario = pool.scenario(name)
            env = pool.acquire(name)
            try:
                for idx, solution in sorted(scenario.solutions.items()):
                    env.reset(idx)
                    for c in solution.calls:
                        r = env.step(format_call_tool(c["tool_name"], c.get("arguments") or {}))
                        assert r.info["failure"] is None, (name, idx, c, r.observation)
                    final = env.step(solution.final_answer or "Done.")
                    assert final.info["outcome"] == "complete", (
                        name,
                        idx,
                        final.info["verification"],
                    )
                    env.reset(idx)
                    assert env.step("I did nothing.").info["outcome"] == "others", (name, idx)
            finally:
                pool.release(env)
    finally:
        pool.close()
