"""State identities of the collected MDP (pure; the database digest runs sandboxed).

A state is what the actor has seen before a decision. Two ways to name it:

* ``history`` (a tree): sha256 chained over the task and the canonical history of
  (help given, agent action, observation). Paths share a state exactly while their
  histories are equal.
* ``db`` (paths merge, a DAG): sha256 of the task, the turn index, a digest of the
  database content and the last observation. Paths that reach the same world state
  with the same last observation at the same turn merge (e.g. a path with help and
  one without that did the same calls), which gives more data per state. The turn
  index keeps the graph acyclic (repeating a failed call would otherwise lead back
  to the same key) and the state Markov under the episode's turn limit.

Terminal states (episode over) hash the key of the final situation together with
how the episode ended and its outcome, under their own tag, so a key is never
terminal in one episode and not in another, and its success is fixed.

Ids are the first 8 bytes of sha256 as a signed int64: the same on every run and
machine. Wall-clock timestamps that an app writes (``datetime.now()``) would make
them differ, so values that look like a timestamp within a day of the collection
run are replaced by ``<now>`` before hashing and in state texts (the actor itself
sees the raw observation); older and newer timestamps (the apps' data) are kept.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DIGEST_FUNCTION",
    "ClockWindow",
    "DbKeys",
    "HistoryKeys",
    "STATE_KEYS",
    "canonical_action",
    "canonical_json",
    "canonicalize",
    "digest_code",
    "id_of",
    "make_keys",
]

STATE_KEYS = ("history", "db")
_VERSION = "helpdp-collect/1"

# "2025-11-22 10:31:07", "2025-11-22T10:31:07.123+00:00", "...Z"
_CLOCK = re.compile(
    r"(?<![0-9])(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?(?![0-9])"
)


@dataclass(frozen=True)
class ClockWindow:
    """Timestamps ``lo <= 'YYYY-MM-DD HH:MM:SS' <= hi`` are the run's own clock readings."""

    lo: str
    hi: str

    @classmethod
    def around(cls, start: float, end: float, margin_s: float = 86400.0) -> ClockWindow:
        """The window [start - margin, end + margin] (POSIX seconds, any time zone within a day)."""

        def fmt(t: float) -> str:
            return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")

        return cls(fmt(start - margin_s), fmt(end + margin_s))


def canonicalize(text: str, window: ClockWindow | None) -> str:
    """``text`` with the run's own timestamps replaced by ``<now>``."""
    if window is None or not text or "-" not in text:
        return text

    def sub(m: re.Match) -> str:
        stamp = f"{m.group(1)} {m.group(2)}"
        return "<now>" if window.lo <= stamp <= window.hi else m.group(0)

    return _CLOCK.sub(sub, text)


def canonical_json(obj: Any) -> str:
    """Compact, key-sorted JSON (non-JSON values by ``str``)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def id_of(digest: bytes) -> int:
    """The state id of a sha256 digest: its first 8 bytes as a signed int64."""
    return int.from_bytes(digest[:8], "big", signed=True)


def _sha(*parts: Any) -> bytes:
    return hashlib.sha256(canonical_json([_VERSION, *parts]).encode("utf-8")).digest()


def canonical_action(action: dict[str, Any], turn_text: str) -> dict[str, Any]:
    """What identifies an agent turn: the parsed action, not its wording.

    ``action`` is :meth:`collect.protocol.Action.as_dict`. Tool calls are their tool
    and arguments (free text around the call is ignored), a final answer is its
    text, an invalid turn is its failure class and its raw text.
    """
    kind = action.get("kind")
    if kind == "call_tool":
        return {"kind": kind, "tool": action.get("tool_name"), "args": action.get("arguments")}
    if kind == "final":
        return {"kind": kind, "text": (turn_text or "").strip()}
    if kind == "invalid":
        return {"kind": kind, "failure": action.get("failure"), "text": turn_text or ""}
    return {"kind": kind, "args": action.get("arguments")}


class HistoryKeys:
    """``history`` keys: a hash chain over the canonical history (a tree)."""

    name = "history"
    needs_digest = False

    def start(self, task_id: str, digest: str | None = None) -> tuple[int, bytes]:
        chain = _sha("start", task_id)
        return id_of(chain), chain

    def step(
        self,
        chain: bytes,
        task_id: str,
        depth: int,
        element: dict[str, Any],
        digest: str | None = None,
    ) -> tuple[int, bytes]:
        """Key of the state at ``depth`` reached by one more step from the state of ``chain``.

        ``element``: the step's help (action and text), agent action and observation,
        canonical (see :func:`canonical_action`).
        """
        nxt = hashlib.sha256(chain + canonical_json(element).encode("utf-8")).digest()
        return id_of(nxt), nxt

    def terminal(
        self,
        chain: bytes,
        task_id: str,
        depth: int,
        element: dict[str, Any],
        end_reason: str,
        outcome: str,
        digest: str | None = None,
    ) -> int:
        last = hashlib.sha256(chain + canonical_json(element).encode("utf-8")).digest()
        return id_of(_sha("terminal", last.hex(), end_reason, outcome))


class DbKeys:
    """``db`` keys: task + turn + database digest + last observation (paths merge)."""

    name = "db"
    needs_digest = True

    def start(self, task_id: str, digest: str | None = None) -> tuple[int, bytes]:
        key = _sha("db", task_id, 0, digest or "", "")
        return id_of(key), key

    def step(
        self,
        chain: bytes,
        task_id: str,
        depth: int,
        element: dict[str, Any],
        digest: str | None = None,
    ) -> tuple[int, bytes]:
        key = _sha("db", task_id, int(depth), digest or "", element.get("observation", ""))
        return id_of(key), key

    def terminal(
        self,
        chain: bytes,
        task_id: str,
        depth: int,
        element: dict[str, Any],
        end_reason: str,
        outcome: str,
        digest: str | None = None,
    ) -> int:
        obs = element.get("observation", "")
        return id_of(
            _sha("terminal-db", task_id, int(depth), digest or "", obs, end_reason, outcome)
        )


def make_keys(name: str) -> HistoryKeys | DbKeys:
    if name == "history":
        return HistoryKeys()
    if name == "db":
        return DbKeys()
    raise ValueError(f"state_key must be one of {STATE_KEYS}, got {name!r}")


DIGEST_FUNCTION = "helpdp_db_digest"

_DIGEST_TEMPLATE = '''
def helpdp_db_digest(initial_db_path, final_db_path):
    """sha256 over every table's rows (sorted), with the run's own timestamps masked."""
    import hashlib
    import re
    import sqlite3

    lo, hi = LO, HI
    clock = re.compile(PATTERN)

    def mask(value):
        if isinstance(value, str) and "-" in value:
            def sub(m):
                stamp = m.group(1) + " " + m.group(2)
                return "<now>" if lo <= stamp <= hi else m.group(0)
            return clock.sub(sub, value)
        if isinstance(value, bytes):
            return "bytes:" + hashlib.sha256(value).hexdigest()
        return value

    conn = sqlite3.connect("file:" + final_db_path + "?mode=ro", uri=True)
    try:
        h = hashlib.sha256()
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )]
        for name in names:
            quoted = '"' + name.replace('"', '""') + '"'
            rows = sorted(repr(tuple(mask(v) for v in r)) for r in conn.execute("SELECT * FROM " + quoted))
            h.update(repr((name, len(rows))).encode())
            for r in rows:
                h.update(r.encode())
                h.update(b"\\n")
        return {"digest": h.hexdigest(), "tables": len(names)}
    finally:
        conn.close()
'''


def digest_code(window: ClockWindow | None) -> str:
    """Source of the sandboxed database digest (run as a SQL-mode verifier)."""
    lo, hi = (window.lo, window.hi) if window else ("~", "~")
    return (
        _DIGEST_TEMPLATE.replace("LO, HI", f"{lo!r}, {hi!r}")
        .replace("PATTERN", repr(_CLOCK.pattern))
        .lstrip("\n")
    )
