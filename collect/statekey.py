"""State identities of the collected MDP (pure; the database digest is the environment's,
:meth:`collect.awm.env.AWMEnv.db_digest`).

A state is what the actor has seen before a decision. Three ways to name it:

* ``history`` (a tree): sha256 chained over the task and the canonical history of
  (help given, agent action, observation). Paths share a state exactly while their
  histories are equal.
* ``db`` (paths merge, a DAG): sha256 of the task, the turn index, a digest of the
  database content and the last observation. Paths that reach the same world state
  with the same last observation at the same turn merge (e.g. a path with help and
  one without that did the same calls), which gives more data per state. The turn
  index keeps the graph acyclic (repeating a failed call would otherwise lead back
  to the same key) and the state Markov under the episode's turn limit, for an actor
  whose behaviour depends only on the world and the latest observation.
* ``db_help``: the ``db`` key plus the age of the latest expert message the actor still
  remembers (1: given at the previous turn, up to ``help_window`` turns; older messages
  count as forgotten). An actor that has advice in its context acts differently (the
  simulated actor errs less for ``plan_memory`` turns; an LLM follows a plan), so ``db``
  merges states whose futures differ: a path helped at turn 0 and one not helped meet at
  turn 1 with different chances. The DP then credits the help's lasting effect to the
  merged state, which both paths reach, and under-values help where it starts.
  ``db_help`` keeps them apart at the price of fewer visits per state.

Terminal states (episode over) hash the key of the final situation together with
how the episode ended and its outcome, under their own tag, so a key is never
terminal in one episode and not in another, and its success is fixed.

Ids are the first 8 bytes of sha256 as a signed int64: the same on every run and
machine. Dates that apps and seed data compute from "now" reach the hashes as they
are: dataset code runs on the fixed world clock (:mod:`collect.awm.clock`), so they are
the same on every day.
"""

from __future__ import annotations

import hashlib
import json

from helpdp.events import args_sha
from helpdp.jsonvalue import JSON

__all__ = [
    "DbHelpKeys",
    "DbKeys",
    "HistoryKeys",
    "STATE_KEYS",
    "arguments_sha",
    "canonical_action",
    "canonical_json",
    "id_of",
    "make_keys",
    "recordable",
]

STATE_KEYS = ("history", "db", "db_help")
_VERSION = "helpdp-collect/1"


def canonical_json(obj: object) -> str:
    """Compact, key-sorted JSON (non-JSON values by ``str``); hashed as UTF-8 with
    ``surrogatepass``: a model's lone surrogate is data, and valid text keeps its bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def recordable(text: str) -> str:
    """``text`` as a table (UTF-8) can hold it: each lone surrogate, which a model's reply
    may hold and UTF-8 cannot, as ``\\uXXXX`` (as world text is rendered); valid text as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def arguments_sha(arguments: JSON) -> str:
    """:func:`helpdp.events.args_sha` of a call's arguments, for any reply: arguments with a
    lone surrogate, or a string too deep to decode, hash their canonical JSON as UTF-8 with
    ``surrogatepass`` (valid arguments keep ``args_sha``'s value)."""
    try:
        return args_sha(arguments)
    except (UnicodeEncodeError, RecursionError):
        text = canonical_json(arguments).encode("utf-8", "surrogatepass")
        return hashlib.sha256(text).hexdigest()[:16]


def id_of(digest: bytes) -> int:
    """The state id of a sha256 digest: its first 8 bytes as a signed int64."""
    return int.from_bytes(digest[:8], "big", signed=True)


def _sha(*parts: object) -> bytes:
    return hashlib.sha256(
        canonical_json([_VERSION, *parts]).encode("utf-8", "surrogatepass")
    ).digest()


def canonical_action(action: dict[str, JSON], turn_text: str) -> dict[str, JSON]:
    """What identifies an agent turn: the parsed action, not its wording.

    ``action`` is :meth:`collect.awm.protocol.Action.as_dict`. Tool calls are their tool
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
        element: dict[str, JSON],
        digest: str | None = None,
    ) -> tuple[int, bytes]:
        """Key of the state at ``depth`` reached by one more step from the state of ``chain``.

        ``element``: the step's help (action and text), agent action and observation,
        canonical (see :func:`canonical_action`).
        """
        nxt = hashlib.sha256(
            chain + canonical_json(element).encode("utf-8", "surrogatepass")
        ).digest()
        return id_of(nxt), nxt

    def terminal(
        self,
        chain: bytes,
        task_id: str,
        depth: int,
        element: dict[str, JSON],
        end_reason: str,
        outcome: str,
        digest: str | None = None,
    ) -> int:
        last = hashlib.sha256(
            chain + canonical_json(element).encode("utf-8", "surrogatepass")
        ).digest()
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
        element: dict[str, JSON],
        digest: str | None = None,
    ) -> tuple[int, bytes]:
        key = _sha("db", task_id, int(depth), digest or "", element.get("observation", ""))
        return id_of(key), key

    def terminal(
        self,
        chain: bytes,
        task_id: str,
        depth: int,
        element: dict[str, JSON],
        end_reason: str,
        outcome: str,
        digest: str | None = None,
    ) -> int:
        obs = element.get("observation", "")
        return id_of(
            _sha("terminal-db", task_id, int(depth), digest or "", obs, end_reason, outcome)
        )


def _check_window(window: int) -> int:
    if not 0 <= int(window) <= 255:  # the age is one byte of the chain
        raise ValueError(f"help_window must be in 0..255, got {window!r}")
    return int(window)


class DbHelpKeys(DbKeys):
    """``db_help`` keys: the ``db`` key plus the age of the latest remembered expert message.

    The chain is the key's digest followed by one byte, the age (0: no message
    remembered). Terminal keys are the ``db`` ones: an ended episode has no future.
    """

    name = "db_help"

    def __init__(self, window: int):
        self.window = _check_window(window)

    def _age(self, chain: bytes, element: dict[str, JSON]) -> int:
        """Age at the next state: 1 after a step with help, else one more, 0 past the window."""
        if element.get("help"):
            age = 1
        else:
            prev = chain[-1] if chain else 0
            age = prev + 1 if prev else 0
        return age if age <= self.window else 0

    def start(self, task_id: str, digest: str | None = None) -> tuple[int, bytes]:
        key = _sha("db_help", task_id, 0, digest or "", "", 0)
        return id_of(key), key + bytes([0])

    def step(
        self,
        chain: bytes,
        task_id: str,
        depth: int,
        element: dict[str, JSON],
        digest: str | None = None,
    ) -> tuple[int, bytes]:
        age = self._age(chain, element)
        obs = element.get("observation", "")
        key = _sha("db_help", task_id, int(depth), digest or "", obs, age)
        return id_of(key), key + bytes([age])


def make_keys(name: str, help_window: int = 3) -> HistoryKeys | DbKeys:
    """The state keys called ``name``; ``help_window`` is used by ``db_help`` only (and
    checked for every name, so a bad config fails whatever the key)."""
    _check_window(help_window)
    if name == "history":
        return HistoryKeys()
    if name == "db":
        return DbKeys()
    if name == "db_help":
        return DbHelpKeys(help_window)
    raise ValueError(f"state_key must be one of {STATE_KEYS}, got {name!r}")
