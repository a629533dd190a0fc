"""Conformance of helpdp's AWM runtime with the official ``agent-world-model==0.1.0`` (issue #49).

For each world of the given AWM directories it compares four things with the official
package, run in a Python 3.12 venv of its own (never in .venv):

* **reset**: the world's initial database, built by helpdp
  (:func:`collect.awm.app.build_scenario_database`: the sandboxed build worker on the
  default world clock) and by the official ``awm.core.db.create_sqlite_database`` +
  ``awm.core.sample.execute_sample_data``; ``iterdump()`` and the row count of every
  table. Normalisation (:func:`normalise_timestamps`): a dump line that differs only in
  date/time literals (``YYYY-MM-DD`` with an optional ``HH:MM:SS[.ffffff]``) counts as the
  same, because helpdp's seed rows read the fixed world clock where the official build
  reads the wall clock (``datetime('now')``, ``CURRENT_TIMESTAMP``); such lines are counted.
* **tools**: the tool list (names, input schemas, descriptions) helpdp derives from the
  app's OpenAPI document (:func:`collect.awm.tools.tools_from_openapi`, the app loaded in
  helpdp's sandboxed app worker) against ``fastapi_mcp.FastApiMCP(app).tools`` (0.4.0) in
  the official venv, the app imported in process there (the server's rewritten code when it
  compiles, else the world's own code with ``DATABASE_PATH`` set). Normalisation: the
  top-level ``"title": "<name>Arguments"`` fastapi-mcp puts on every input schema is
  dropped (:func:`strip_arguments_title`), key order and the order of ``required`` are
  ignored; helpdp's descriptions are built with ``describe_responses=True`` (the
  ``env.describe_responses`` option; its default, False, leaves the response example out).
* **server rewrite**: the official ``awm.core.server.run_server`` rewrite of each line
  holding ``create_engine(`` (and of ``uvicorn.run(app``) applied to the world's
  ``full_code``: does the result compile.
* **responses**: every task's reference calls replayed from that task's initial database
  in both runtimes (helpdp: ``EnvPool``/``AWMEnv.step``, the text the agent reads, uncut;
  official: ``FastApiMCP._execute_api_tool`` as its MCP server answers, ``Error: `` before
  an error result as ``awm.core.agent`` prints it). Normalisations
  (:func:`compare_response`): the same JSON value (fastapi-mcp re-indents the app's body),
  timestamps aside; an HTTP error is the same status and body under each runtime's wording.
* **protocol** (one table, not per world): what each runtime does with the assistant turns
  of :data:`PROTOCOL_CASES` (the final answer, the first call only, ``mcp_tool_`` names,
  arguments as a string or an object, malformed and untagged calls, unknown functions):
  helpdp's :func:`collect.awm.protocol.parse_turn` (strict) against the official agent
  loop's ``parse_tool_calls`` and ``parse_call_tool_arguments``.

The official venv (``--venv DIR``; created when absent, refused when DIR exists and is not
such a venv) is made with::

    python3.12 -m venv DIR
    DIR/bin/pip install 'agent-world-model==0.1.0' 'mcp<2'

(``mcp<2``: the package's ``mcp-agent`` pin otherwise pulls ``mcp`` 2.x, where ``FastMCP``
was renamed, and ``awm`` does not import.) ``make awm-official`` does the same for
``.venv-awm-official``.

Usage (default sources: ../shared/awm-samples, collect/worlds and 20 generated worlds)::

    .venv/bin/python bench/awm_conformance.py --venv .venv-awm-official --out FILE.md

The official side imports the worlds' apps in its own process, as the official server
does, so that process is confined by the kernel (:func:`confined`): bubblewrap with every
namespace unshared (no network, its own PIDs), the file system read-only but for its work
directory, and rlimits on memory and CPU time; it runs without seccomp and as
the caller's uid inside its user namespace (docs/security.md). Without bubblewrap it
refuses to run.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PIP_INSTALL = ("agent-world-model==0.1.0", "mcp<2")
# python3.12 on PATH, else pyenv's (a shim without that version installed does not start)
PYTHON312 = (
    "python3.12",
    *sorted(str(p) for p in (Path.home() / ".pyenv" / "versions").glob("3.12*/bin/python3.12")),
)
# the official side's limits (it runs the worlds' code): address space and CPU seconds (its
# processes are bounded by its PID namespace, not by RLIMIT_NPROC, which counts the uid's)
OFFICIAL_LIMITS = {"RLIMIT_AS": 4 << 30, "RLIMIT_CPU": 1800}
ASPECTS = ("reset", "tools", "server rewrite", "responses")

_TS = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?")


# --------------------------------------------------------------------------- pure parts


def normalise_timestamps(line: str) -> str:
    """``line`` with every date/time literal replaced by ``<TS>``."""
    return _TS.sub("<TS>", line)


def compare_dumps(ours: list[str], theirs: list[str]) -> tuple[str | None, int]:
    """(first difference in one line or None, number of lines equal only after normalising)."""
    clock_lines = 0
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a == b:
            continue
        if normalise_timestamps(a) == normalise_timestamps(b):
            clock_lines += 1
            continue
        return f"dump line {i + 1}: helpdp {_short(a)} vs official {_short(b)}", clock_lines
    if len(ours) != len(theirs):
        return f"dump length: helpdp {len(ours)} lines vs official {len(theirs)}", clock_lines
    return None, clock_lines


def compare_counts(ours: dict[str, int], theirs: dict[str, int]) -> str | None:
    """First table whose row count differs (or that only one side has), else None."""
    for table in sorted(set(ours) | set(theirs)):
        a, b = ours.get(table), theirs.get(table)
        if a != b:
            return f"rows of {table}: helpdp {a} vs official {b}"
    return None


def compare_tools(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> str | None:
    """First difference between two MCP tool listings (name, inputSchema, description)."""
    a_names, b_names = [t["name"] for t in ours], [t["name"] for t in theirs]
    if set(a_names) != set(b_names):
        only_a = sorted(set(a_names) - set(b_names))
        only_b = sorted(set(b_names) - set(a_names))
        return f"names: only helpdp {only_a[:3]}, only official {only_b[:3]}"
    by_name = {t["name"]: t for t in theirs}
    for t in ours:
        o = by_name[t["name"]]
        if _canon(t["inputSchema"]) != _canon(strip_arguments_title(t["name"], o["inputSchema"])):
            return f"{t['name']} inputSchema: {_schema_diff(t['inputSchema'], o['inputSchema'])}"
    head_diffs = [
        t["name"]
        for t in ours
        if _head(t.get("description")) != _head(by_name[t["name"]].get("description"))
    ]
    resp_diffs = [
        t["name"]
        for t in ours
        if (t.get("description") or "").strip()
        != (by_name[t["name"]].get("description") or "").strip()
    ]
    if resp_diffs and not head_diffs:
        t, o = next(t for t in ours if t["name"] == resp_diffs[0]), by_name[resp_diffs[0]]
        return (
            f"descriptions of {len(resp_diffs)}/{len(ours)} tools differ only in the "
            f"'### Responses' section, first {resp_diffs[0]} "
            f"{divergence(t.get('description') or '', o.get('description') or '')}"
        )
    for t in ours:
        o = by_name[t["name"]]
        if (t.get("description") or "").strip() != (o.get("description") or "").strip():
            return f"{t['name']} description: {divergence(t.get('description') or '', o.get('description') or '')}"
    if a_names != b_names:
        return "names: same set, different order"
    return None


def _head(description: str | None) -> str:
    """A tool description without its ``### Responses`` section."""
    return (description or "").split("### Responses")[0].strip()


def strip_arguments_title(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without the top-level ``"title": "<name>Arguments"`` fastapi-mcp adds."""
    if isinstance(schema, dict) and schema.get("title") == f"{name}Arguments":
        return {k: v for k, v in schema.items() if k != "title"}
    return schema


def _canon(schema: Any) -> str:
    """Key order and the order of ``required`` do not matter."""

    def norm(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: sorted(v) if k == "required" and isinstance(v, list) else norm(v)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [norm(v) for v in node]
        return node

    return json.dumps(norm(schema), sort_keys=True)


def _schema_diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    pa, pb = a.get("properties") or {}, b.get("properties") or {}
    if set(pa) != set(pb):
        return f"properties helpdp {sorted(pa)} vs official {sorted(pb)}"
    for k in sorted(pa):
        if _canon(pa[k]) != _canon(pb[k]):
            return (
                f"property {k}: helpdp {_short(_canon(pa[k]))} vs official {_short(_canon(pb[k]))}"
            )
    return f"helpdp {_short(_canon(a))} vs official {_short(_canon(b))}"


def divergence(a: str, b: str, width: int = 40) -> str:
    """Where two texts first differ: the character offset and a window of each."""
    a, b = a.strip(), b.strip()
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    lo = max(0, i - 10)
    return f"at char {i}: helpdp {a[lo : i + width]!r} vs official {b[lo : i + width]!r}"


def _short(text: str, n: int = 90) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= n else text[: n - 3] + "...")


_ERR_OURS = re.compile(r"^Error: invalid arguments for \S+ \(HTTP (\d{3})\): (.*)$", re.S)
_ERR_OURS_HTTP = re.compile(
    r"^Error: (?:server error in \S+ \(HTTP (\d{3})\)|HTTP (\d{3}) from \S+): (.*)$", re.S
)
_ERR_THEIRS = re.compile(
    r"^Error: Error calling \S+\. Status code: (\d{3})\. Response: (.*)$", re.S
)


def _value(text: str) -> Any:
    """A response's JSON value with timestamps normalised, or None if it is not JSON."""
    try:
        v = json.loads(text)
    except (ValueError, TypeError):
        return None
    return json.loads(normalise_timestamps(json.dumps(v, sort_keys=True)))


def _error(text: str, *patterns: re.Pattern) -> tuple[str, Any] | None:
    for pat in patterns:
        m = pat.match(text)
        if m:
            *codes, raw = m.groups()
            body = _value(raw)
            return next(c for c in codes if c), body if body is not None else raw.strip()
    return None


def compare_response(ours: str, theirs: str) -> str | None:
    """None when one call's texts agree after the normalisations (the same JSON value,
    timestamps aside; for an HTTP error, the same status and body under each runtime's
    own wording), else what differs."""
    if ours == theirs:
        return None
    a, b = _value(ours), _value(theirs)
    if a is not None and b is not None:
        return None if a == b else f"values differ: {divergence(ours, theirs)}"
    ea, eb = _error(ours, _ERR_OURS, _ERR_OURS_HTTP), _error(theirs, _ERR_THEIRS)
    if ea is not None and eb is not None:
        return None if ea == eb else f"errors differ: helpdp {ea}, official {eb}"
    if normalise_timestamps(ours.strip()) == normalise_timestamps(theirs.strip()):
        return None
    return divergence(ours, theirs)


def _sameness(ours: str, theirs: str) -> str:
    """How two texts that :func:`compare_response` finds the same agree: ``bytes``,
    ``layout`` (the same JSON value, or the same error, laid out otherwise) or ``clock``
    (the same only with timestamps normalised: the apps write the time of the call)."""
    if ours == theirs:
        return "bytes"
    try:
        if json.loads(ours) == json.loads(theirs):
            return "layout"
    except (ValueError, TypeError):
        pass
    ea, eb = _error(ours, _ERR_OURS, _ERR_OURS_HTTP), _error(theirs, _ERR_THEIRS)
    if ea is not None and ea == eb and normalise_timestamps(ours) == ours:
        return "layout"
    return (
        "clock"
        if normalise_timestamps(ours) != ours or normalise_timestamps(theirs) != theirs
        else "layout"
    )


def compare_responses(
    ours: list[list[str]], theirs: list[Any], tasks: list[int], calls: list[list[dict]]
) -> str:
    """The responses verdict of one world: every replayed call's texts compared."""
    counts = {"bytes": 0, "layout": 0, "clock": 0}
    for idx, o, t, cs in zip(tasks, ours, theirs, calls):
        if isinstance(t, dict):
            return f"differs: task {idx}: the official side failed: {t.get('error')}"
        for j, (a, b, c) in enumerate(zip(o, t, cs)):
            diff = compare_response(a, b)
            if diff:
                return f"differs: task {idx} call {j} ({c['tool_name']}): {diff[:160]}"
            counts[_sameness(a, b)] += 1
    n = sum(counts.values())
    if not n:
        return "n/a (no reference calls)"
    how = [f"{counts['bytes']} byte for byte"]
    if counts["layout"]:
        how.append(f"{counts['layout']} in another layout (fastapi-mcp indents JSON by 2)")
    if counts["clock"]:
        how.append(f"{counts['clock']} with the time of the call (the world clock)")
    return f"same ({n} calls of {len(tasks)} tasks: {', '.join(how)})"


def _call(name: str, args: Any) -> str:
    inner = json.dumps(args) if not isinstance(args, str) else args
    return (
        "<tool_call>\n"
        + json.dumps({"name": "call_tool", "arguments": {"tool_name": name, "arguments": inner}})
        + "\n</tool_call>"
    )


#: assistant turns whose reading the protocol row compares (label, text)
PROTOCOL_CASES = [
    ("one call", _call("get_item", {"item_id": 1})),
    ("two calls: the first runs", _call("get_item", {"item_id": 1}) + _call("list_items", {})),
    ("no call: the final answer", "The order was shipped on May 3."),
    ("list_tools", '<tool_call>\n{"name": "list_tools", "arguments": null}\n</tool_call>'),
    ("mcp_tool_ prefix on the tool name", _call("mcp_tool_get_item", {"item_id": 1})),
    (
        "an mcp_tool_ function name",
        '<tool_call>{"name": "mcp_tool_get_item", "arguments": {"item_id": 1}}</tool_call>',
    ),
    (
        "arguments as an object",
        '<tool_call>{"name": "call_tool", "arguments": {"tool_name": "get_item", '
        '"arguments": {"item_id": 1}}}</tool_call>',
    ),
    ("empty arguments string", _call("list_items", "")),
    ("text around the call", "Let me look.\n" + _call("get_item", {"item_id": 2}) + "\nThen done."),
    (
        "a list-wrapped call",
        '<tool_call>[{"name": "list_tools", "arguments": null}]</tool_call>',
    ),
    (
        "a trailing comma",
        '<tool_call>{"name": "list_tools", "arguments": null,}</tool_call>',
    ),
    ("malformed JSON in the tags", '<tool_call>{"name": "call_tool", "arguments": {</tool_call>'),
    (
        "a malformed call, then a valid one",
        '<tool_call>{"name": </tool_call>' + _call("get_item", {"item_id": 1}),
    ),
    ("an untagged call", '{"name": "list_tools", "arguments": null}'),
    ("an unclosed tag", '<tool_call>{"name": "list_tools", "arguments": null}'),
    ("an unknown function", '<tool_call>{"name": "get_item", "arguments": {}}</tool_call>'),
]


def helpdp_protocol(text: str) -> dict[str, Any]:
    """What helpdp's runtime does with an assistant turn (strict AWM reading)."""
    from collect.awm.protocol import parse_turn

    a = parse_turn(text, expert_enabled=False)
    if a.kind == "final":
        return {"kind": "final"}
    if a.kind == "list_tools":
        return {"kind": "list_tools"}
    if a.kind == "call_tool":
        return {"kind": "call_tool", "tool_name": a.tool_name, "arguments": a.arguments}
    failure = a.failure.value if a.failure else None
    if failure == "unknown_meta_function":
        return {"kind": "unknown_function", "name": a.as_dict().get("name") or "?"}
    return {"kind": "format_error", "failure": failure}


def protocol_rows(theirs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per :data:`PROTOCOL_CASES` entry: both readings and same/differs."""
    rows = []
    for (label, text), t in zip(PROTOCOL_CASES, theirs):
        o = helpdp_protocol(text)
        if o.get("kind") == "unknown_function" and t.get("kind") == "unknown_function":
            o["name"] = t.get("name")  # the name is the turn's own in both
        same = o == t
        rows.append(
            {
                "case": label,
                "helpdp": json.dumps(o, sort_keys=True),
                "official": json.dumps(t, sort_keys=True),
                "verdict": "same" if same else "differs",
            }
        )
    return rows


def protocol_table(rows: list[dict[str, str]]) -> str:
    lines = ["| turn | helpdp | official | verdict |", "|---|---|---|---|"]
    for r in rows:
        cells = [r[k].replace("|", "\\|") for k in ("case", "helpdp", "official", "verdict")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def server_rewrite(code: str, db_path: str = "/tmp/x.db") -> str:
    """The official ``run_server`` rewrite of ``code`` (awm 0.1.0, ``awm/core/server.py``).

    Only used where the official package is not importable (the tests); the conformance
    run applies the package's own ``run_server`` logic in the official venv.
    """
    import textwrap

    def lines_of(raw: str, indent: int) -> list[str]:
        return textwrap.indent(textwrap.dedent(raw).strip(), " " * indent).split("\n")

    out = ["import warnings", 'warnings.filterwarnings("ignore", category=DeprecationWarning)']
    for line in code.split("\n"):
        if "create_engine(" in line:
            left = line.split("create_engine(")[0]
            line = f"{left}create_engine('sqlite:///{db_path}', connect_args={{'check_same_thread': False}})"
        if "uvicorn.run(app" in line:
            out.extend(lines_of("import os\nhost = '127.0.0.1'\nport = 8001", 4))
            out.extend(
                lines_of(
                    "from fastapi_mcp import FastApiMCP\nmcp = FastApiMCP(app)\nmcp.mount_http()", 4
                )
            )
            line = "    uvicorn.run(app, host=host, port=int(port))"
        out.append(line)
    return "\n".join(out)


def markdown_table(rows: list[dict[str, str]]) -> str:
    """One row per world: source, world, then each aspect's verdict."""
    head = "| source | world | " + " | ".join(ASPECTS) + " |"
    sep = "|" + "---|" * (2 + len(ASPECTS))
    body = [
        "| "
        + " | ".join(
            [r["source"], r["world"]] + [r.get(a, "n/a").replace("|", "\\|") for a in ASPECTS]
        )
        + " |"
        for r in rows
    ]
    return "\n".join([head, sep, *body]) + "\n"


def summary(rows: list[dict[str, str]]) -> dict[str, dict[str, int]]:
    """Per aspect: how many worlds are same / differ / n/a."""
    out: dict[str, dict[str, int]] = {}
    for a in ASPECTS:
        c = {"same": 0, "differs": 0, "n/a": 0}
        for r in rows:
            v = r.get(a, "n/a")
            c[
                "same" if v.startswith("same") else "differs" if v.startswith("differs") else "n/a"
            ] += 1
        out[a] = c
    return out


# --------------------------------------------------------------------------- the official venv


def _is_official_venv(d: Path) -> bool:
    py = d / "bin" / "python"
    if not py.exists():
        return False
    r = subprocess.run(
        [str(py), "-c", "import importlib.metadata as m; print(m.version('agent-world-model'))"],
        capture_output=True,
        text=True,
    )
    return r.returncode == 0 and r.stdout.strip() == "0.1.0"


def _runs(python: str) -> bool:
    """``python`` exists and starts (a pyenv shim without that version does not)."""
    if not (shutil.which(python) or Path(python).exists()):
        return False
    try:
        return subprocess.run([python, "-c", "pass"], capture_output=True).returncode == 0
    except OSError:
        return False


def ensure_venv(d: Path) -> Path:
    """The official venv's python (created when ``d`` is absent); ``SystemExit`` otherwise."""
    d = Path(d)
    if d.exists():
        if not _is_official_venv(d):
            raise SystemExit(f"{d} exists and is not a venv with agent-world-model==0.1.0: refused")
        return d / "bin" / "python"
    py312 = next((p for p in PYTHON312 if _runs(p)), None)
    if py312 is None:
        raise SystemExit("no python3.12 found (agent-world-model needs Python >= 3.12)")
    subprocess.run([py312, "-m", "venv", str(d)], check=True)
    r = subprocess.run([str(d / "bin" / "pip"), "install", "-q", *PIP_INSTALL])
    if r.returncode != 0:
        shutil.rmtree(d, ignore_errors=True)
        raise SystemExit("pip install of the official package failed (no network?)")
    return d / "bin" / "python"


def confined(argv: list[str], work: Path) -> list[str]:
    """``argv`` under bubblewrap: all namespaces unshared (network, PIDs, IPC, UTS, user),
    ``/`` read-only, ``work`` writable, a fresh ``/dev`` and ``/proc``; dies with us."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SystemExit(
            "bubblewrap (bwrap) is missing: the official side runs the worlds' code and runs "
            "only confined"
        )
    return [
        *(bwrap, "--unshare-all", "--die-with-parent", "--new-session"),
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
        *("--bind", str(work), str(work), "--chdir", str(work), "--"),
        *argv,
    ]


def _official_limits() -> None:  # in the child, before bubblewrap starts
    import resource

    for name, value in OFFICIAL_LIMITS.items():
        resource.setrlimit(getattr(resource, name), (value, value))


OFFICIAL_SIDE = ROOT / "bench" / "awm_official_side.py"


def _official(python: Path, job: dict[str, Any], work: Path) -> dict[str, Any]:
    path = work / "job.json"
    path.write_text(json.dumps(job))
    r = subprocess.run(
        # absolute (bubblewrap starts in the work dir), not resolved (the venv is a symlink)
        confined([str(Path(python).absolute()), "-B", str(OFFICIAL_SIDE), str(path)], Path(work)),
        capture_output=True,
        text=True,
        cwd=work,
        preexec_fn=_official_limits,
    )
    if r.returncode != 0:
        raise SystemExit(f"the official side failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout)


def run_official(python: Path, worlds: list[dict[str, Any]], work: Path) -> list[dict[str, Any]]:
    """The official side's results for ``worlds`` (bench/awm_official_side.py)."""
    return _official(python, {"worlds": worlds}, work)["worlds"]


def official_protocol(python: Path, texts: list[str], work: Path) -> list[dict[str, Any]]:
    """What the official agent loop does with each assistant turn of ``texts``."""
    return _official(python, {"protocol": texts}, work)["protocol"]


# --------------------------------------------------------------------------- helpdp's side


def _dump(path: Path) -> tuple[list[str], dict[str, int]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        lines = list(conn.iterdump())
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        counts = {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()
    return lines, counts


def helpdp_side(scenario: Any, work: Path) -> dict[str, Any]:
    from collect.awm.app import build_scenario_database
    from collect.awm.sandbox import AppWorker, SandboxLimits
    from collect.awm.tools import tools_from_openapi

    r: dict[str, Any] = {}
    db = None
    if scenario.db_schema is not None:
        try:
            db, _report = build_scenario_database(scenario, work / "helpdp-db")
            r["dump"], r["counts"] = _dump(db)
        except Exception as e:  # noqa: BLE001 - reported in the table
            r["db_error"] = f"{type(e).__name__}: {e}"
    if scenario.env_code is not None:
        app = AppWorker(SandboxLimits(), workdir=work / "helpdp-app", name=scenario.name)
        try:
            openapi = app.load(scenario.env_code, db)
            # the tools as fastapi-mcp lists them: with the success response example and a
            # path's operations in the document's order (env.describe_responses=true,
            # env.tool_order=document; helpdp's defaults leave the example out, order by method)
            tools = tools_from_openapi(openapi, describe_responses=True, tool_order="document")
            r["tools"] = [t.as_dict() for t in tools]
        except Exception as e:  # noqa: BLE001
            r["tools_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        finally:
            app.close()
    return r


def helpdp_responses(pool: Any, scenario: Any) -> dict[str, Any]:
    """Each task's reference calls replayed in helpdp's runtime (``pool``: an
    ``EnvPool`` of the world's directory), each from the task's reset: the texts the
    agent reads (``tasks``, ``calls``, ``responses``; ``responses_error`` if it failed)."""
    from collect.awm.protocol import format_call_tool

    tasks = sorted(i for i, sol in scenario.solutions.items() if sol.calls)
    calls = [list(scenario.solutions[i].calls) for i in tasks]
    r: dict[str, Any] = {"tasks": tasks, "calls": calls}
    if not tasks:
        return r
    try:
        env = pool.acquire(scenario.name)
    except Exception as e:  # noqa: BLE001 - reported in the table
        return {**r, "responses_error": f"{type(e).__name__}: {str(e)[:200]}"}
    try:
        out = []
        for idx, cs in zip(tasks, calls):
            env.reset(idx)
            step = [format_call_tool(c["tool_name"], c.get("arguments") or {}) for c in cs]
            out.append([env.step(text).observation for text in step])
        r["responses"] = out
    except Exception as e:  # noqa: BLE001
        r["responses_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        pool.release(env)
    return r


def verdicts(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, str]:
    v: dict[str, str] = {}
    if "responses" in theirs or ours.get("responses_error"):
        if "responses" not in ours or "responses" not in theirs:
            v["responses"] = (
                f"differs: not replayed (helpdp {ours.get('responses_error')}, official "
                f"{theirs.get('tools_error')})"
            )
        else:
            v["responses"] = compare_responses(
                ours["responses"], theirs["responses"], ours["tasks"], ours["calls"]
            )
    if "dump" in ours or "dump" in theirs or "db_error" in ours or "db_error" in theirs:
        if "dump" not in ours or "dump" not in theirs:
            v["reset"] = (
                f"differs: build failed (helpdp {ours.get('db_error')}, official {theirs.get('db_error')})"
            )
        else:
            diff, clock = compare_dumps(ours["dump"], theirs["dump"])
            diff = compare_counts(ours["counts"], theirs["counts"]) or diff
            note = f" ({clock} lines differ only in clock timestamps)" if clock else ""
            v["reset"] = f"differs: {diff}" if diff else f"same{note}"
    if "tools" in ours or "tools" in theirs or "tools_error" in ours or "tools_error" in theirs:
        if "tools" not in ours or "tools" not in theirs:
            v["tools"] = (
                f"differs: no tools (helpdp {ours.get('tools_error')}, official {theirs.get('tools_error')})"
            )
        else:
            diff = compare_tools(ours["tools"], theirs["tools"])
            n = len(ours["tools"])
            src = (
                " (official: the world's own code)"
                if theirs.get("tools_from") == "original"
                else ""
            )
            v["tools"] = f"differs: {diff}{src}" if diff else f"same ({n} tools){src}"
    if "rewrite" in theirs:
        v["server rewrite"] = (
            f"differs: does not compile: {theirs['rewrite']}"
            if theirs["rewrite"]
            else "same (compiles)"
        )
    return v


# --------------------------------------------------------------------------- main


def default_sources(tmp: Path) -> list[tuple[str, Path]]:
    gen = tmp / "generated"
    subprocess.run(
        [sys.executable, "-m", "collect.worlds.generate", f"out={gen}", "n=20", "seed=0"],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    return [
        ("awm-samples", ROOT.parent / "shared" / "awm-samples"),
        ("demo worlds", ROOT / "collect" / "worlds"),
        ("generated (n=20 seed=0)", gen),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--venv", type=Path, default=ROOT / ".venv-awm-official")
    ap.add_argument("--out", type=Path, help="markdown table (refused when the file exists)")
    ap.add_argument(
        "--layout",
        default="app",
        choices=("app", "fastapi_mcp"),
        help="helpdp's env.response_layout for the responses (fastapi_mcp: the official's)",
    )
    ap.add_argument(
        "dirs", nargs="*", type=Path, help="AWM directories (default: the three sources)"
    )
    args = ap.parse_args(argv)
    if args.out is not None and args.out.exists():
        raise SystemExit(f"{args.out} exists: refused")
    python = ensure_venv(args.venv)

    from collect.awm.dataset import AWMDataset
    from collect.awm.env import EnvConfig, EnvPool

    rows: list[dict[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="awm-conformance-") as t:
        tmp = Path(t)
        sources = [(str(d), d) for d in args.dirs] if args.dirs else default_sources(tmp)
        for label, d in sources:
            ds = AWMDataset(d)
            # the whole response is compared (helpdp cuts the agent's copy at 16,000 chars)
            pool = EnvPool(d, EnvConfig(max_observation_chars=10**8, response_layout=args.layout))
            jobs, ours = [], []
            try:
                for i, name in enumerate(ds.names()):
                    sc = ds.get(name)
                    work = tmp / f"{len(rows)}-{i}"
                    (work / "official").mkdir(parents=True)
                    ours.append({**helpdp_side(sc, work), **helpdp_responses(pool, sc)})
                    jobs.append(
                        {
                            "name": name,
                            "db_schema": sc.db_schema,
                            "sample_data": sc.sample_data,
                            "code": sc.env_code,
                            "dir": str(work / "official"),
                            "replays": [
                                {"idx": k, "calls": c}
                                for k, c in zip(ours[-1]["tasks"], ours[-1]["calls"])
                            ],
                        }
                    )
            finally:
                pool.close()
            theirs = run_official(python, jobs, tmp)
            for job, o, th in zip(jobs, ours, theirs):
                row = {"source": label, "world": job["name"], **verdicts(o, th)}
                rows.append(row)
                print(
                    " | ".join(row.get(k, "n/a") for k in ("source", "world", *ASPECTS)), flush=True
                )
        prows = protocol_rows(official_protocol(python, [text for _, text in PROTOCOL_CASES], tmp))
    table = markdown_table(rows) + "\n" + protocol_table(prows)
    print(protocol_table(prows))
    counts = summary(rows)
    counts["protocol"] = {v: sum(r["verdict"] == v for r in prows) for v in ("same", "differs")}
    print(json.dumps(counts))
    if args.out is not None:
        with open(args.out, "x") as f:
            f.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
