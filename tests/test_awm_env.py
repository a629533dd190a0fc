"""Episodes through AWMEnv: demo-world solutions, hidden tools, format errors, turn limit, judge, async."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx2
import pytest

from collect.awm.dataset import AWMDataset
from collect.awm.env import AWMEnv, EnvConfig, EnvPool
from collect.awm.protocol import Failure, format_call_tool, format_tool_call
from collect.awm.rewards import RewardConfig
from collect.awm.verification import Judge, JudgeConfig

WORLDS = Path(__file__).resolve().parent.parent / "collect" / "worlds"

APP = """
import os
from typing import Optional
from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel
from sqlalchemy import create_engine, text

engine = create_engine(os.getenv("DATABASE_PATH"), connect_args={"check_same_thread": False})
app = FastAPI(title="Shop")


class NewItem(BaseModel):
    name: str
    price: float = 1.0


@app.get("/items", operation_id="list_items", summary="List items")
def list_items(q: Optional[str] = Query(None, description="Name filter")):
    with engine.connect() as c:
        rows = c.execute(text("SELECT id, name, price FROM items ORDER BY id")).all()
    return {"items": [dict(r._mapping) for r in rows if not q or q in r.name]}


@app.post("/items", operation_id="add_item", summary="Add an item")
def add_item(item: NewItem):
    with engine.begin() as c:
        c.execute(text("INSERT INTO items (name, price) VALUES (:n, :p)"), {"n": item.name, "p": item.price})
    return {"added": item.name}


@app.get("/items/{item_id}", operation_id="get_item", summary="Get one item")
def get_item(item_id: int):
    with engine.connect() as c:
        row = c.execute(text("SELECT id, name FROM items WHERE id = :i"), {"i": item_id}).first()
    if row is None:
        raise HTTPException(status_code=404, detail="item not found")
    return dict(row._mapping)


@app.get("/boom", operation_id="boom", summary="Always fails")
def boom():
    raise ValueError("kaput")


# harness-like routes an agent must never reach
@app.post("/verify", operation_id="verify")
def verify():
    with engine.begin() as c:
        c.execute(text("INSERT INTO items (name, price) VALUES ('gadget', 0)"))
    return {"result": "complete"}


@app.post("/done", operation_id="done")
def done():
    return verify()


@app.get("/scenarios", operation_id="list_scenarios")
def list_scenarios():
    return verify()
"""

CODE_VERIFIER = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    names = {r[0] for r in sqlite3.connect(final_db_path).execute("SELECT name FROM items")}
    return {"result": "complete" if "gadget" in names else "others"}
"""

SQL_VERIFIER = """
def verify_task(initial_db_path, final_db_path):
    import sqlite3
    before = sqlite3.connect(initial_db_path).execute("SELECT count(*) FROM items").fetchone()[0]
    after = sqlite3.connect(final_db_path).execute("SELECT name FROM items").fetchall()
    return {"items_before": before, "items_after": [r[0] for r in after]}
"""


def write_shop(root: Path) -> Path:
    tasks = ["Add an item named gadget.", "Add an item named gizmo."]
    records = {
        "gen_tasks.jsonl": [{"scenario": "shop_1", "tasks": tasks}],
        "gen_db.jsonl": [
            {
                "scenario": "shop_1",
                "db_schema": {
                    "tables": [
                        {
                            "name": "items",
                            "ddl": "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL)",
                            "indexes": [],
                        }
                    ]
                },
            }
        ],
        "gen_sample.jsonl": [
            {
                "scenario": "shop_1",
                "sample_data": {
                    "tables": [
                        {
                            "table_name": "items",
                            "insert_statements": [
                                "INSERT INTO items (name, price) VALUES ('widget', 2.5)"
                            ],
                        }
                    ]
                },
            }
        ],
        "gen_envs.jsonl": [{"scenario": "shop_1", "db_path": "shop.db", "full_code": APP}],
        "gen_verifier.pure_code.jsonl": [
            {
                "scenario": "shop_1",
                "task_idx": i,
                "task": t,
                "verification": {"code": CODE_VERIFIER},
            }
            for i, t in enumerate(tasks)
        ],
        "gen_verifier.jsonl": [
            {
                "scenario": "shop_1",
                "task_idx": 1,
                "task": tasks[1],
                "verification": {"code": SQL_VERIFIER},
            }
        ],
    }
    root.mkdir(parents=True, exist_ok=True)
    for name, rows in records.items():
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def call(tool, arguments=None, *, name="call_tool"):
    if name == "call_tool":
        return format_call_tool(tool, arguments or {})
    return format_tool_call(name, arguments)


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    root = tmp_path_factory.mktemp("shop")
    scenario = AWMDataset(write_shop(root / "data")).get("shop_1")
    env = AWMEnv(scenario, EnvConfig(), work_root=root / "work")
    yield env
    env.close()


# ---------------------------------------------------------------------------
# demo worlds
# ---------------------------------------------------------------------------


def _world_solutions():
    if not (WORLDS / "gen_solutions.jsonl").exists():
        return []
    ds = AWMDataset(WORLDS)
    return [(name, idx) for name in ds.names() for idx in sorted(ds.get(name).solutions)]


@pytest.fixture(scope="module")
def world_pool():
    pool = EnvPool(WORLDS)
    yield pool
    pool.close()


@pytest.mark.skipif(
    not (WORLDS / "gen_solutions.jsonl").exists(),
    reason="collect/worlds/gen_solutions.jsonl does not exist yet (demo worlds not shipped)",
)
def test_every_demo_task_is_solved_by_its_reference_solution(world_pool):
    solved, total = [], _world_solutions()
    assert total, "gen_solutions.jsonl lists no solutions"
    for name in world_pool.names():
        scenario = world_pool.scenario(name)
        if not scenario.solutions:
            continue
        env = world_pool.acquire(name)
        try:
            assert set(scenario.solutions) == set(range(scenario.n_tasks)), (
                f"{name}: a task lacks a solution"
            )
            for idx, solution in sorted(scenario.solutions.items()):
                env.reset(idx)
                assert not env.step(call("", name="list_tools")).info["failure"]
                for c in solution.calls:
                    result = env.step(call(c["tool_name"], c.get("arguments") or {}))
                    assert result.info["failure"] is None, (name, idx, c, result.observation)
                final = env.step(solution.final_answer or "Done.")
                assert final.done and final.info["outcome"] == "complete", (
                    name,
                    idx,
                    final.info["verification"],
                )
                assert final.reward == 1.0 and final.info["format_errors"] == 0
                solved.append((name, idx))
            # doing nothing is not enough
            env.reset(0)
            idle = env.step("I did nothing.")
            assert idle.info["outcome"] == "others" and idle.reward == 0.0
        finally:
            world_pool.release(env)
    assert sorted(solved) == sorted(total)


# ---------------------------------------------------------------------------
# protocol through the environment
# ---------------------------------------------------------------------------


def test_hidden_tools_cannot_be_reached_whatever_name_is_sent(shop):
    shop.reset(0)
    assert {t.name for t in shop.tools} == {"list_items", "add_item", "get_item", "boom"}
    listing = shop.step(call("", name="list_tools")).observation
    for hidden in ("verify", "done", "list_scenarios"):
        assert f"mcp_tool_{hidden}\n" not in listing
    attempts = [
        call("verify"),
        call("done"),
        call("list_scenarios"),
        call("mcp_tool_verify"),
        call("VERIFY"),
        call(" done "),
        call("Verify"),
        call("get_scenarios"),
        call(None, {}, name="mcp_tool_verify"),
        call(None, {}, name="mcp_tool_done"),
    ]
    for text in attempts:
        result = shop.step(text)
        assert result.info["failure"] == Failure.UNKNOWN_TOOL.value, (text, result.info)
        assert "does not exist" in result.observation
    for meta in ("verify", "done", "list_scenarios", "reset"):
        shop.config.terminate_on_format_error = False
        result = shop.step(call(None, {}, name=meta))
        assert result.info["failure"] == Failure.UNKNOWN_META_FUNCTION.value
    shop.config.terminate_on_format_error = True
    assert shop.call_tool("verify").failure is Failure.UNKNOWN_TOOL
    final = shop.step("I am done.")
    assert final.info["outcome"] == "others"  # the hidden routes never ran


def test_tool_failures_are_classified(shop):
    shop.reset(0)
    assert shop.step(call("get_item", {"item_id": 1})).info["status_code"] == 200
    not_found = shop.step(call("get_item", {"item_id": 99}))
    assert not_found.info["failure"] == "tool_error" and "HTTP 404" in not_found.observation
    bad_type = shop.step(call("get_item", {"item_id": "abc"}))
    assert bad_type.info["failure"] == "invalid_arguments" and bad_type.info["status_code"] == 422
    crash = shop.step(call("boom"))
    assert crash.info["failure"] == "server_error" and "ValueError: kaput" in crash.observation
    unknown = shop.step(call("no_such_tool"))
    assert unknown.info["failure"] == "unknown_tool"
    ok = shop.step(call("add_item", {"name": "gadget", "price": 3}))
    assert ok.info["failure"] is None
    final = shop.step("Added gadget.")
    assert final.info["outcome"] == "complete" and final.reward == 1.0
    assert final.info["failures"] == {
        "tool_error": 1,
        "invalid_arguments": 1,
        "server_error": 1,
        "unknown_tool": 1,
    }
    assert final.info["format_errors"] == 0 and final.info["tool_calls"] == 6


@pytest.mark.parametrize(
    ("text", "failure"),
    [
        ('<tool_call>{"name": "list_tools"', "malformed_tag"),
        ("<tool_call>{oops}</tool_call>", "invalid_json"),
        (call(None, {}, name="drop_tables"), "unknown_meta_function"),
    ],
)
def test_format_errors_end_the_episode_with_minus_one(shop, text, failure):
    shop.reset(0)
    result = shop.step(text)
    assert result.done and result.reward == -1.0
    assert result.info["outcome"] == "format_error" and result.info["failure"] == failure
    assert result.info["format_errors"] == 1


def test_format_errors_are_counted_when_the_episode_continues(shop):
    shop.config.terminate_on_format_error = False
    try:
        shop.reset(0)
        for text in ("<tool_call>{oops}</tool_call>", "</tool_call>", call(None, {}, name="nope")):
            result = shop.step(text)
            assert not result.done and result.observation.startswith("Error: ")
        shop.step(call("add_item", {"name": "gadget"}))
        final = shop.step("done")
        assert final.info["format_errors"] == 3 and final.info["outcome"] == "complete"
    finally:
        shop.config.terminate_on_format_error = True


def test_turn_limit_ends_and_verifies(shop):
    shop.config.max_turns = 2
    try:
        shop.reset(0)
        assert not shop.step(call("add_item", {"name": "gadget"})).done
        last = shop.step(call("list_items"))
        assert last.done and last.info["truncated"] and last.info["outcome"] == "complete"
        with pytest.raises(RuntimeError):
            shop.step("more")
    finally:
        shop.config.max_turns = 30


def test_a_full_context_truncates_and_verifies_without_a_turn(shop):
    """The actor's prompt no longer fits its window: the episode ends there, its world
    verified as it stands (as at max_turns), no turn counted; then it is over."""
    shop.reset(0)
    assert not shop.step(call("add_item", {"name": "gadget"})).done
    end = shop.truncate()
    assert end.done and end.reward == 1.0 and end.observation == ""
    assert end.info["outcome"] == "complete" and end.info["valid"]
    assert end.info["truncated"] and end.info["context_full"] and end.info["turns"] == 1
    assert end.info["action"] == {"kind": "context_full"}
    with pytest.raises(RuntimeError, match="episode is over"):
        shop.truncate()
    shop.reset(0)
    end = shop.truncate()  # nothing done: verified, not complete
    assert end.info["outcome"] != "complete" and end.info["valid"] and end.info["turns"] == 0


def test_ask_expert_is_returned_as_its_own_action(shop):
    shop.reset(0)
    result = shop.step(call(None, {"question": "Which name?"}, name="ask_expert"))
    assert not result.done and result.info["action"]["kind"] == "ask_expert"
    assert (
        result.info["ask_expert"] == {"question": "Which name?"} and result.info["failure"] is None
    )
    assert shop.state()["expert_calls"] == 1


def test_sql_mode_uses_the_configured_judge(tmp_path, monkeypatch):
    seen = {}

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen["url"] = str(request.url)
        seen["auth"] = request.headers.get("authorization")
        seen["body"] = json.loads(request.content)
        answer = {"label": "incomplete", "reason": "gizmo added without a price"}
        return httpx2.Response(
            200, json={"choices": [{"message": {"content": json.dumps(answer)}}]}
        )

    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-test")
    config = EnvConfig(
        judge=JudgeConfig(
            base_url="http://judge.test/v1", model="judge-m", api_key_env="TEST_JUDGE_KEY"
        )
    )
    scenario = AWMDataset(write_shop(tmp_path / "data")).get("shop_1")
    judge = Judge(config.judge, transport=httpx2.MockTransport(handler))
    with AWMEnv(scenario, config, judge=judge, work_root=tmp_path / "work") as env:
        env.reset(1)
        env.step(call("add_item", {"name": "gizmo"}))
        final = env.step("Added gizmo.")
        assert final.info["outcome"] == "incomplete" and final.reward == RewardConfig().incomplete
        assert final.info["verification"]["mode"] == "sql"
        assert final.info["verification"]["detail"]["evidence"] == {
            "items_before": 1,
            "items_after": ["widget", "gizmo"],
        }
        assert (
            seen["url"] == "http://judge.test/v1/chat/completions"
            and seen["auth"] == "Bearer sk-test"
        )
        assert (
            seen["body"]["model"] == "judge-m"
            and "Add an item named gizmo." in seen["body"]["messages"][1]["content"]
        )
        env.reset(0)  # task 0 has no SQL verifier: code mode
        env.step(call("add_item", {"name": "gadget"}))
        assert env.step("ok").info["verification"]["mode"] == "code"


def test_from_dir_and_reset_errors(tmp_path):
    with AWMEnv.from_dir(
        write_shop(tmp_path / "data"), "Shop 1", EnvConfig(work_root=str(tmp_path / "w"))
    ) as env:
        with pytest.raises(RuntimeError, match="reset"):
            env.step("hello")
        with pytest.raises(IndexError, match="no task 5"):
            env.reset(5)
        assert env.reset(1).task == "Add an item named gizmo."


def test_async_api_awaits_without_blocking_the_loop(shop):
    async def episode():
        first = await shop.areset(0)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await shop.astep(call("add_item", {"name": "gadget"}))
        final = await shop.astep("done")
        task.cancel()
        return first, final, ticks

    first, final, ticks = asyncio.run(episode())
    assert first.messages[1]["content"] == "Add an item named gadget."
    assert final.info["outcome"] == "complete" and ticks > 0


def test_db_digest_is_the_database_content(shop, tmp_path):
    """The environment's digest of its database (state_key=db) runs sandboxed and equals
    database_digest computed here on an export; it changes with the content only."""
    import sqlite3

    from collect.awm.verification import database_digest

    shop.reset(0)
    start = shop.db_digest()
    assert len(start) == 64 and shop.db_digest() == start
    assert start == database_digest("", str(shop.initial_db))["digest"]
    shop.step(call("add_item", {"name": "gadget"}))
    changed = shop.db_digest()
    assert changed != start
    copy = tmp_path / "copy.db"
    with sqlite3.connect(shop.initial_db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
        dst.execute("INSERT INTO items (name, price) VALUES ('gadget', 1.0)")
    assert database_digest("", str(copy)) == {"digest": changed, "tables": 1}
    shop.reset(0)
    assert shop.db_digest() == start


def test_a_null_max_idle_envs_is_the_default_cap_not_every_one(monkeypatch):
    # keeping every idle environment grew with the worlds (21 GB at 100 generated worlds)
    import collect.awm.env as env_mod

    monkeypatch.setattr(env_mod, "IDLE_ENVS_DEFAULT", 1)
    names = ["smart_home_1", "workflow_automation_1"]
    with EnvPool(WORLDS, EnvConfig(max_idle_envs=None), scenarios=names) as pool:
        a, b = pool.acquire(names[0]), pool.acquire(names[1])
        pool.release(a)
        pool.release(b)
        assert a._closed and not b._closed and len(pool._all) == 1


def test_pool_keeps_at_most_max_idle_envs_least_recently_released_stopped():
    names = ["smart_home_1", "workflow_automation_1"]
    with EnvPool(WORLDS, EnvConfig(max_idle_envs=1), scenarios=names) as pool:
        a, b = pool.acquire(names[0]), pool.acquire(names[1])
        a.reset(0)
        b.reset(0)
        pool.release(a)
        assert not a._closed  # one idle: within the cap
        pool.release(b)  # two idle: a, released first, is stopped
        assert a._closed and not b._closed
        assert pool.acquire(names[1]) is b  # b is reused
        fresh = pool.acquire(names[0])  # a is gone: a new worker
        assert fresh is not a and fresh.reset(0).task
        assert len(pool._all) == 2 and pool._released == {}
