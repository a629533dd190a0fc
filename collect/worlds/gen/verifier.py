"""The code verifier of a generated task: one self-contained function over the initial and
final databases, with the task's expected change embedded as JSON.

``expect`` says, per table, which rows must change and to what (``updated``: ``{id:
{column: value}}``; the columns in ``ignore`` may change too, e.g. ``updated_at``),
which must be gone (``deleted``), and which must be new (``created``: a list of
``[table, {column: value or {"$new": k}}]`` in creation order, where ``{"$new": k}``
is the ID of the k-th created row); every other row of every table must be unchanged
and no other row may appear. ``answer``: the strings of which the final answer must
contain one (a number must appear as a whole number).
"""

from __future__ import annotations

import inspect
import json
import textwrap


def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import json
    import re
    import sqlite3

    expect = json.loads("__EXPECT__")

    def load(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            out = {}
            for (name,) in names:
                cur = conn.execute(f'SELECT * FROM "{name}"')
                cols = [d[0] for d in cur.description]
                out[name] = {row[0]: dict(zip(cols, row)) for row in cur.fetchall()}
            return out
        finally:
            conn.close()

    def same(want, got):
        if isinstance(want, str) and isinstance(got, str):
            return want.strip().casefold() == got.strip().casefold()
        if isinstance(want, (int, float)) and isinstance(got, (int, float)):
            return abs(want - got) < 1e-6
        return want == got

    try:
        before, after = load(initial_db_path), load(final_db_path)
    except Exception:
        return {"result": "others"}
    if sorted(before) != sorted(after):
        return {"result": "others"}
    created = {}
    for table, spec in expect["created"]:
        created.setdefault(table, []).append(spec)
    for table in sorted(before):
        old, new = before[table], after[table]
        updated = {int(k): v for k, v in expect["updated"].get(table, {}).items()}
        deleted = set(expect["deleted"].get(table, []))
        ignore = set(expect["ignore"].get(table, []))
        for rid, row in old.items():
            if rid in deleted:
                if rid in new:
                    return {"result": "others"}
                continue
            if rid not in new:
                return {"result": "others"}
            change = updated.get(rid)
            if change is None:
                if new[rid] != row:
                    return {"result": "others"}
                continue
            for col, value in new[rid].items():
                if col in change:
                    if not same(change[col], value):
                        return {"result": "others"}
                elif col not in ignore and value != row.get(col):
                    return {"result": "others"}
        if len([r for r in new if r not in old]) != len(created.get(table, [])):
            return {"result": "others"}
    ids = []
    used = set()
    for table, spec in expect["created"]:
        found = None
        for rid in sorted(r for r in after[table] if r not in before[table]):
            if (table, rid) in used:
                continue
            row = after[table][rid]
            ok = True
            for col, want in spec.items():
                if isinstance(want, dict):
                    want = ids[want["$new"]] if want["$new"] < len(ids) else None
                if col not in row or not same(want, row[col]):
                    ok = False
                    break
            if ok:
                found = rid
                break
        if found is None:
            return {"result": "others"}
        used.add((table, found))
        ids.append(found)
    if expect["answer"]:
        text = (final_answer or "").casefold()
        hit = False
        for want in expect["answer"]:
            want = str(want).casefold()
            if re.fullmatch(r"-?\d+(\.\d+)?", want):
                hit = (
                    hit
                    or re.search(r"(?<![\d.])" + re.escape(want) + r"(?![\d]|\.\d)", text)
                    is not None
                )
            else:
                hit = hit or want in text
        if not hit:
            return {"result": "others"}
    return {"result": "complete"}


_SOURCE = textwrap.dedent(inspect.getsource(verify_task_completion))


def verifier_code(expect: dict) -> str:
    """The verifier's source with ``expect`` embedded (sorted keys: deterministic)."""
    for key in ("updated", "deleted", "created", "ignore", "answer"):
        if key not in expect:
            raise ValueError(f"expect has no {key!r}")
    text = json.dumps(expect, sort_keys=True, ensure_ascii=False)
    return _SOURCE.replace('"__EXPECT__"', json.dumps(text, ensure_ascii=False), 1)
