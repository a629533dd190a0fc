"""A one-table AWM world for the environment tests: notes over SQLite, written as the
AWM ``gen_*.jsonl`` files that ``collect.awm`` reads."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

# the app's tools: list_notes and add_note (a test appends its own endpoints)
NOTES_APP = """
import os
import time
from fastapi import FastAPI
from pydantic import BaseModel
from sqlalchemy import create_engine, text

engine = create_engine(os.getenv("DATABASE_PATH"))
app = FastAPI()


class Note(BaseModel):
    body: str


@app.get("/notes", operation_id="list_notes", summary="List notes")
def list_notes():
    with engine.connect() as c:
        return {"notes": [r[0] for r in c.execute(text("SELECT body FROM notes ORDER BY id"))]}


@app.post("/notes", operation_id="add_note", summary="Add a note")
def add_note(note: Note):
    with engine.begin() as c:
        c.execute(text("INSERT INTO notes (body) VALUES (:b)"), {"b": note.body})
    return {"added": note.body}
"""

MILK_TASK = "Add a note saying 'remember the milk'."

# complete when the note of MILK_TASK is in the final database
MILK_VERIFIER = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    rows = sqlite3.connect(final_db_path).execute("SELECT body FROM notes").fetchall()
    return {"result": "complete" if ("remember the milk",) in rows else "others"}
"""


def notes_world(root: Path, apps: Mapping[str, str], tasks: Sequence[tuple[str, str]]) -> Path:
    """Write an AWM data directory at ``root``: one scenario per ``apps`` entry (name:
    the app's code), each with the notes table (one row, 'first') and the same ``tasks``
    ((task, verifier code), in order)."""
    rows: dict[str, list[dict]] = {}
    for name, code in apps.items():
        table = {"name": "notes", "ddl": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"}
        sample = {
            "table_name": "notes",
            "insert_statements": ["INSERT INTO notes (body) VALUES ('first')"],
        }
        records = {
            "gen_tasks.jsonl": [{"scenario": name, "tasks": [t for t, _ in tasks]}],
            "gen_db.jsonl": [
                {"scenario": name, "db_schema": {"tables": [{**table, "indexes": []}]}}
            ],
            "gen_sample.jsonl": [{"scenario": name, "sample_data": {"tables": [sample]}}],
            "gen_envs.jsonl": [{"scenario": name, "db_path": "n.db", "full_code": code}],
            "gen_verifier.pure_code.jsonl": [
                {"scenario": name, "task_idx": i, "task": t, "verification": {"code": v}}
                for i, (t, v) in enumerate(tasks)
            ],
        }
        for file, records_of in records.items():
            rows.setdefault(file, []).extend(records_of)
    root.mkdir(parents=True, exist_ok=True)
    for file, records_of in rows.items():
        (root / file).write_text("".join(json.dumps(r) + "\n" for r in records_of))
    return root


@contextlib.contextmanager
def served(config) -> Iterator[str]:
    """Run the app of ``config`` (a ``uvicorn.Config``) in a thread on a free loopback
    port; yields its URL once the server has started, and stops it after."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def notes_databases(root: Path) -> tuple[Path, Path]:
    """(initial, final) notes databases: the final one holds MILK_TASK's note (MILK_VERIFIER:
    complete)."""
    import sqlite3

    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rows in (("initial.db", ["first"]), ("final.db", ["first", "remember the milk"])):
        path = root / name
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            conn.executemany("INSERT INTO notes (body) VALUES (?)", [(r,) for r in rows])
        conn.close()
        paths.append(path)
    return paths[0], paths[1]
