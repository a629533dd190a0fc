"""The command boundary: every ``python -m ...`` command checks its arguments before
Hydra sees them, and turns the project's own errors into one line (both wired by
:func:`cliconf.run_app`).

* :func:`check_argv`: each ``key=value`` (also ``+key``/``++key``) must name a field
  of the command's schema, nested through dataclass fields; an unknown key is
  refused with the closest field ("did you mean"), ``+`` or not (Hydra would accept
  ``+budjet=1`` and ignore it); a key a schema renamed (its ``RENAMED_KEYS``, old name
  -> new) is refused naming the new one. Keys below a ``dict`` field (``budgets.expert=1``)
  are open: they are passed on as ``++key``, so the documented spelling works without
  a ``+``.
* :func:`guard`: runs a command's body; a ``ValueError`` (the projects' own errors
  derive from it: ``DatasetError``, ``UsageError``, ...), ``FileNotFoundError``,
  ``FileExistsError``, ``NotADirectoryError``, ``KeyError`` or a command's own error
  types prints
  ``<command>: error: <message>`` on stderr and exits with status 2.
  ``HYDRA_FULL_ERROR=1`` shows the traceback instead. A missing optional package
  (``ModuleNotFoundError``) says which, and what installs it. Ctrl-C prints one line
  (``<command>: interrupted``, with what was kept when the body raises
  :class:`Interrupted`) and exits 130.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
import typing
from collections.abc import Callable, Sequence
from typing import Any

#: what a command body returns (:func:`guard` passes it on)
R = typing.TypeVar("R")

__all__ = ["Interrupted", "UsageError", "check_argv", "guard", "parse_budgets", "renamed_key"]

ERRORS = (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, KeyError)


class UsageError(ValueError):
    """A command-line argument the command cannot take."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what was kept (raised by a body that caught ``KeyboardInterrupt``);
    :func:`guard` prints ``<command>: interrupted: <message>`` and exits 130."""


def _fields(schema: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(schema)}


def _field_type(schema: type, f: dataclasses.Field) -> object:
    try:
        return typing.get_type_hints(schema)[f.name]
    except Exception:  # noqa: BLE001 - unresolvable annotation: treat as open
        return Any


def _is_open(tp: object) -> bool:
    origin = typing.get_origin(tp) or tp
    return tp is Any or origin in (dict, typing.Dict)  # noqa: UP006


def renamed_key(schema: type, override: str) -> str | None:
    """What to say of ``override`` (``key=value``) whose key names a field ``schema``
    renamed (its ``RENAMED_KEYS``, old name -> new, at any depth), None otherwise; what
    :func:`check_argv` refuses, for code that composes a config itself."""
    key, _, value = override.lstrip("+~").partition("=")
    error, _ = _check_key(schema, key, value)
    return error if error and "' is now '" in error else None


def _check_key(schema: type, key: str, value: str = "") -> tuple[str | None, bool]:
    """(error, open): ``error`` names what is wrong with ``key=value``; ``open`` says the
    key is below a dict field (passed on with ``++``)."""
    node, done = schema, []
    parent: type = schema
    for part in key.split("."):
        if not dataclasses.is_dataclass(node):
            return None, True
        fields = _fields(node)
        renamed = getattr(node, "RENAMED_KEYS", {}).get(part)
        if part not in fields and renamed in fields:
            new = ".".join([*done, renamed, *key.split(".")[len(done) + 1 :]])
            give = f"{new}={value}" if value else new
            return f"'{key}' is now '{new}': give {give}", False
        if part not in fields:
            where = ".".join(done)
            close = difflib.get_close_matches(part, list(fields), n=1, cutoff=0.6)
            hint = f" (did you mean '{'.'.join([*done, close[0]])}'?)" if close else ""
            scope = f"'{where}'" if where else "this command"
            return f"unknown key '{key}': {scope} has no field '{part}'{hint}", False
        tp = _field_type(node, fields[part])
        done.append(part)
        parent = node
        if dataclasses.is_dataclass(tp):
            node = tp
        elif _is_open(tp):
            return None, len(done) < len(key.split("."))
        else:
            node = tp
    if value.startswith("[") and node in (int, float, str, bool):
        lists = [
            f.name
            for f in dataclasses.fields(parent)
            if (typing.get_origin(_field_type(parent, f)) or _field_type(parent, f)) is list
        ]
        close = difflib.get_close_matches(done[-1], lists, n=1, cutoff=0.6)
        hint = f" (did you mean '{'.'.join([*done[:-1], close[0]])}'?)" if close else ""
        return f"'{key}' takes one value, not a list{hint}", False
    return _type_error(key, value, node), False


_NAMES = {  # type: (one, a list of them)
    int: ("an int", "a list of ints"),
    float: ("a float", "a list of floats"),
    bool: ("a bool (true|false)", "a list of bools (true|false)"),
}


def _type_error(key: str, value: str, tp: object) -> str | None:
    """What is wrong with ``value`` for a field of type ``tp`` (an int, float or bool,
    optional or not, or a list of them), checked as Hydra would: the value parsed by
    Hydra's override grammar, then validated by OmegaConf's node of that type. None
    for a value that converts, a sweep, an interpolation or any other type."""
    optional = type(None) in typing.get_args(tp)
    if optional:
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = rest[0] if len(rest) == 1 else Any
    is_list = (typing.get_origin(tp) or tp) is list
    item = (typing.get_args(tp) or (Any,))[0] if is_list else tp
    if item not in _NAMES or "${" in value:
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import ValidationError
    from omegaconf.nodes import BooleanNode, FloatNode, IntegerNode

    try:
        parsed = OverridesParser.create().parse_override(f"k={value}").value()
    except Exception:  # noqa: BLE001 - Hydra reports its own syntax errors
        return None
    node = {int: IntegerNode, float: FloatNode, bool: BooleanNode}[item]
    if parsed is None and optional:
        return None
    if is_list and isinstance(parsed, list):
        items = parsed
    elif is_list and isinstance(parsed, str | int | float | bool):
        want = _NAMES[item][1] + (" or null" if optional else "")
        form = " or a range START:STOP" if item is int else ""
        return f"'{key}' takes {want} (e.g. [1,2]{form}), not {value!r}"
    elif is_list or not isinstance(parsed, str | int | float | bool | None):
        return None  # a sweep (1,2) or a value of another shape: Hydra's to judge
    else:
        items = [parsed]
    try:
        for v in items:
            if v is None:
                raise ValidationError("null")
            node(value=v)
    except ValidationError:
        want = _NAMES[item][is_list] + (" or null" if optional else "")
        return f"'{key}' takes {want}, not {value!r}"
    return None


def check_argv(
    command: str,
    schema: type,
    argv: Sequence[str] | None = None,
    *,
    groups: Sequence[str] = (),
) -> list[str]:
    """Check and normalise ``argv`` (default ``sys.argv[1:]``, rewritten in place).

    ``groups``: config group names the command accepts (``helper=minilm``,
    ``collect/actor=openai``). Exits with status 2 and one line on an unknown key.
    """
    in_place = argv is None
    args = list(sys.argv[1:] if argv is None else argv)
    out: list[str] = []
    for arg in args:
        if out and out[-1] in HYDRA_FLAGS and (out[-1] not in ("--info", "-i") or arg in INFO):
            out.append(arg)  # the value of Hydra's own flag: --cfg job, -cn config, ...
            continue
        if "=" not in arg and not arg.startswith(("-", "~")):
            hint = f" (did you mean 'out={arg}'?)" if "out" in _fields(schema) else ""
            _exit(command, f"'{arg}': arguments are KEY=VALUE{hint}")
        if arg.startswith("-") or "=" not in arg:
            out.append(arg)
            continue
        key, value = arg.split("=", 1)
        bare = key.lstrip("+~")
        if bare.startswith("hydra.") or bare == "hydra" or bare in groups or "/" in bare:
            _check_parses(command, arg, bare)
            out.append(arg)
            continue
        value = _expand_range(command, schema, bare, value)
        error, is_open = _check_key(schema, bare, value)
        if error:
            _exit(command, error)
        if "=" in value and not value.startswith(("'", '"', "[", "{")):
            value = (
                '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
            )  # a path like out/budget=1
        key = f"++{bare}" if is_open and not key.startswith("~") else key
        _check_parses(command, f"{key}={value}", bare, shown=arg)
        out.append(f"{key}={value}")
    if in_place:
        sys.argv[1:] = out
    return out


#: Hydra's own flags that take the next argument as their value (``--info``'s is optional)
HYDRA_FLAGS = (
    "--cfg",
    "-c",
    "--package",
    "-p",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--experimental-rerun",
    "--info",
    "-i",
)
INFO = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def _check_parses(command: str, override: str, key: str, shown: str | None = None) -> None:
    """Exit 2 with one line naming ``key`` when Hydra's override grammar cannot parse
    ``override`` (an unclosed bracket or quote: ``budget=[0.5,1``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        OverridesParser.create().parse_override(override)
    except Exception as e:  # noqa: BLE001 - Hydra's parse errors are plain HydraExceptions
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        _exit(
            command,
            f"'{shown or override}': cannot parse the value of '{key}' ({why}); close its "
            "brackets and quotes, or quote the whole value",
        )


_RANGE = re.compile(r"^(-?\d+):(-?\d+)$")


def _leaf_type(schema: type, key: str) -> object:
    """The declared type of the field ``key`` (dotted through dataclass fields), or None."""
    node: object = schema
    for part in key.split("."):
        if not dataclasses.is_dataclass(node) or part not in _fields(node):
            return None
        node = _field_type(node, _fields(node)[part])
    return node


def _expand_range(command: str, schema: type, key: str, value: str) -> str:
    """``START:STOP`` for a list-of-ints field (``schedule.seeds=1000:1030``) as the list
    ``[START,...,STOP-1]``, Python's ``range``; any other value as it is."""
    m = _RANGE.match(value)
    if not m:
        return value
    tp = _leaf_type(schema, key)
    if type(None) in typing.get_args(tp):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = rest[0] if len(rest) == 1 else None
    if (typing.get_origin(tp) or tp) is not list or typing.get_args(tp)[:1] != (int,):
        return value
    start, stop = int(m.group(1)), int(m.group(2))
    if stop <= start:
        _exit(command, f"'{key}={value}': an empty range (START:STOP needs STOP > START)")
    return "[" + ",".join(str(i) for i in range(start, stop)) + "]"


def parse_budgets(value: object, name: str = "budget") -> list[float]:
    """A budget or a list of budgets as floats >= 0 (checked before any data loads)."""
    items = value if isinstance(value, list | tuple) or _is_listconfig(value) else [value]
    out = []
    for v in items:
        try:
            b = float(v)
        except (TypeError, ValueError):
            raise UsageError(
                f"{name}={value!r}: not a number or a list of numbers (e.g. {name}=1.0 or "
                f"{name}=[0.5,1,2])"
            ) from None
        if not b >= 0:
            raise UsageError(f"{name}={v!r}: a budget is a number of calls, at least 0")
        out.append(b)
    if not out:
        raise UsageError(f"{name}: no budget given")
    return out


def _is_listconfig(value: object) -> bool:
    return type(value).__name__ == "ListConfig"


def _exit(command: str, message: str) -> typing.NoReturn:
    print(f"{command}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def guard(command: str, body: Callable[..., R], *args, errors: Sequence[type] = (), **kwargs) -> R:
    """``body(*args, **kwargs)``; the project's errors (:data:`ERRORS` and ``errors``)
    become one line and exit 2."""
    try:
        return body(*args, **kwargs)
    except ModuleNotFoundError as e:
        if os.environ.get("HYDRA_FULL_ERROR") == "1" or not e.name:
            raise
        _exit(
            command,
            f"this command needs the package '{e.name.split('.')[0]}', which is not installed: "
            "`make full` installs the whole pipeline into .venv",
        )
    except KeyboardInterrupt as e:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        said = " ".join(str(e).split("\n"))
        print(f"{command}: interrupted" + (f": {said}" if said else ""), file=sys.stderr)
        raise SystemExit(130) from None
    except (*ERRORS, *errors) as e:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        _exit(command, " ".join(str(message).split("\n")))
