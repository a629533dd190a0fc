"""The one way a command is wired: :func:`run_app`.

Every ``python -m ...`` command of the repository is a dataclass schema (each field
documented where it is declared, :func:`cliconf.doc_field`), a primary config
``conf/<config_name>.yaml`` that picks values and config groups, and a body that takes
the composed config::

    def main() -> None:
        run_app("helpdp.search", SearchConfig, run_search, config_name="search")

:func:`run_app` registers the schema in Hydra's ConfigStore as
``<config_name>_schema`` (the primary YAML's first default), answers ``--help``/``-h``
itself (the fields with the values the command line resolves to, one truth; nothing is
written), checks the arguments (:func:`cliconf.check_argv`), and runs the body under
:func:`cliconf.guard` with ``conf/`` on Hydra's search path. The body always receives
an instance of the schema (``OmegaConf.to_object`` of the composed config): types end at
the body's signature, not at the door. Only this module's plumbing (composition,
``--help``, the ``out=`` guard, sweeps) handles the composed ``DictConfig``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib.util
import os
import re
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from helpdp.cliconf.argv import _exit, check_argv, guard
from helpdp.cliconf.outdir import OVERWRITE_HELP, claim_out, guards_out, pop_overwrite
from helpdp.cliconf.quiet import VERBOSE_HELP, pop_verbose, quiet_third_party

T = typing.TypeVar("T")

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = ["CONF_DIR", "Usage", "compose_config", "help_text", "register", "run_app"]

# the top-level ``conf`` package (the repository's conf/, or the wheel's copy): found by
# import, never by path arithmetic from this file
CONF_DIR = Path(importlib.util.find_spec("conf").origin).resolve().parent


def register(
    config_name: str, node: object, groups: Mapping[str, type | None] | None = None
) -> None:
    """Store ``node`` (a schema, or an instance of one) as ``<config_name>_schema``, and
    each ``groups`` schema as ``<group>/<group>_schema`` (what the group's options name
    in their defaults)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name=f"{config_name}_schema", node=node)
    for group, group_schema in (groups or {}).items():
        if group_schema is not None:
            cs.store(group=group, name=f"{group}_schema", node=group_schema)


def compose_config(
    config_name: str,
    overrides: Sequence[str] = (),
    node: object = None,
    groups: Mapping[str, type | None] | None = None,
) -> DictConfig:
    """The config ``conf/<config_name>.yaml`` composes to with ``overrides`` (what the
    command's body would receive), outside any running Hydra app. ``node``, ``groups``:
    what to :func:`register` first (already registered when None)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if node is not None:
        register(config_name, node, groups)
    was = GlobalHydra.instance().is_initialized()
    if was:
        GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            return compose(config_name=config_name, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


def help_text(
    command: str,
    schema: type,
    cfg: DictConfig | object | None,
    *,
    usage: str | None = None,
    extra: Sequence[str] = (),
    config_name: str | None = None,
) -> str:
    """The ``--help`` page: the schema's docstring, then every field as
    ``name=<resolved value>`` with its declared help (``cfg``: the composed config,
    so a config group's values show, e.g. ``prm.lr`` of ``prm=tiny``; a ``schema``
    instance, or None for its defaults), then ``extra``."""
    from omegaconf import OmegaConf

    if not OmegaConf.is_config(cfg):
        cfg = OmegaConf.structured(cfg if cfg is not None else schema)
    doc = " ".join((schema.__doc__ or "").split())
    lines = [
        usage or f"python -m {command} [KEY=VALUE ...]",
        f"  {doc}",
        "",
        "Fields (override as KEY=VALUE; values as resolved from the config and this command line):",
        *_field_lines(schema, cfg, "", "  "),
        *extra,
        "",
        f"Primary config: conf/{config_name or command}.yaml ('???': required). "
        "Use --hydra-help for Hydra's own options.",
    ]
    return "\n".join(lines)


def _field_lines(schema: type, node: DictConfig | None, prefix: str, indent: str) -> list[str]:
    from dataclasses import fields, is_dataclass

    from omegaconf import DictConfig, OmegaConf

    lines = []
    for f in fields(schema):
        name, doc = prefix + f.name, f.metadata.get("help", "")
        missing = node is None or OmegaConf.is_missing(node, f.name)
        value = None if missing else node[f.name]
        sub = OmegaConf.get_type(value) if isinstance(value, DictConfig) else None
        element = value._metadata.element_type if isinstance(value, DictConfig) else None
        if sub is not None and is_dataclass(sub):
            lines.append(f"{indent}{name}.*: {doc}")
            lines += _field_lines(sub, value, name + ".", indent + "  ")
        elif isinstance(element, type) and is_dataclass(element):
            lines.append(f"{indent}{name}.<name>.*: {doc}")
            for key in value or ["<name>"]:
                item = value[key] if key in value else OmegaConf.structured(element)
                lines += _field_lines(element, item, f"{name}.{key}.", indent + "  ")
        else:
            shown = "???" if missing and node is not None else _cli_value(value)
            lines += [f"{indent}{name}={shown}", f"{indent}    {doc}"]
    return lines


def _cli_value(value: object) -> str:
    """``value`` as one writes it on the command line."""
    from omegaconf import OmegaConf

    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=False)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_cli_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_cli_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return value if value and not any(c in value for c in " ,[]{}'\"") else repr(value)
    return repr(value)


def _print_closed_pipe_ok(text: str) -> None:
    """Print ``text``; a reader that closed the pipe early (``--help | head``) is fine."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # stdout is gone: point it at devnull so the interpreter's final flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _check_composes(command: str, config_name: str, args: Sequence[str]) -> None:
    """Compose the config as Hydra is about to, and turn a composition error (a mistyped
    config group option, a value of the wrong type) into one line and exit 2, with the
    options of a group where Hydra lists them."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = [a for a in args if "=" in a and not a.lstrip("+~").startswith("hydra")]
    try:
        compose_config(config_name, overrides)
    except (HydraException, OmegaConfBaseException) as e:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        _composition_exit(command, e)


def _composition_exit(command: str, e: Exception) -> None:
    text = str(e)
    m = re.search(
        r"Could not find '([^']+)'.*?Available options(?: in '[^']+')?:\s*(.*)", text, re.S
    )
    if m:
        group, option = m.group(1).rsplit("/", 1) if "/" in m.group(1) else ("", m.group(1))
        options = []
        for o in m.group(2).split("\n"):
            if options and not o.startswith(("\t", " ")):
                break  # the options end where Hydra's "Config search path" begins
            if o.strip() and not o.strip().endswith("_schema"):
                options.append(o.strip())
        close = difflib.get_close_matches(option, options, n=1, cutoff=0.5)
        hint = f" (did you mean '{group}={close[0]}'?)" if close else ""
        line = f"'{group}={option}': no such option; options: {', '.join(options)}{hint}"
    else:
        first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
        key = getattr(e, "full_key", None)
        line = f"{key}: {first}" if key and key not in first else first
    print(f"{command}: error: {line}", file=sys.stderr)
    raise SystemExit(2)


@dataclasses.dataclass(frozen=True)
class Usage:
    """What a command's ``--help`` says besides its fields: ``line``, the usage line
    (default ``python -m <command> [KEY=VALUE ...]``), and ``extra``, lines after the
    fields."""

    line: str | None = None
    extra: Sequence[str] = ()


def run_app(
    command: str,
    schema: type[T],
    body: Callable[[T], object],
    *,
    config_name: str,
    node: T | None = None,
    groups: Sequence[str] | Mapping[str, type | None] = (),
    usage: Usage = Usage(),
    errors: Sequence[type[BaseException]] = (),
    argv: Sequence[str] | None = None,
    out_dir: bool = True,
) -> None:
    """Run ``body`` as the command ``python -m <command>``.

    ``schema``: the config dataclass (``node``: what to register instead, e.g. an
    instance with other defaults); ``config_name``: the primary YAML in ``conf/``;
    ``groups``: its config groups (``prm=tiny``), or a mapping from each group to the
    schema its options name as ``<group>_schema`` in their defaults; ``usage``: the
    usage line and the lines after the fields in ``--help`` (:class:`Usage`);
    ``errors``: the command's own exception types that become one line and exit 2
    (besides :data:`cliconf.ERRORS`). The body gets a ``schema``
    instance (a required field left ``???`` is one line and exit 2, naming it). A body
    that returns an int exits with it (a check's status).

    A schema with an ``out`` field (and no ``overwrite`` field of its own) has its
    ``out=`` directory guarded (:mod:`cliconf.outdir`: ``overwrite=true``, a lock, the
    record ``OUT/.hydra/``); ``out_dir=False``: its ``out=`` names a file, not guarded.
    Under ``-m`` (a Hydra sweep) each job writes ``OUT/<key>=<value>`` (its swept keys)
    and Hydra's own sweep directory is a temporary one, removed afterwards.
    """
    import hydra

    register(
        config_name,
        schema if node is None else node,
        groups if isinstance(groups, Mapping) else None,
    )
    groups = tuple(groups)
    args = list(sys.argv[1:] if argv is None else argv)
    guarded, overwrite = out_dir and guards_out(schema), False
    extra_help = list(usage.extra)
    if guarded:
        args, overwrite = pop_overwrite(command, args)
        extra_help = [*extra_help, *OVERWRITE_HELP]
    if "verbose" not in {f.name for f in dataclasses.fields(schema)}:
        args, verbose = pop_verbose(command, args)
        extra_help = [*extra_help, *VERBOSE_HELP]
        if not verbose:
            quiet_third_party()
    args = check_argv(command, schema, _run_dir_as_out(command, schema, args), groups=groups)
    sys.argv[1:] = args
    if "--help" in args or "-h" in args:
        overrides = [a for a in args if "=" in a and not a.lstrip("+~").startswith("hydra")]
        try:
            cfg = compose_config(config_name, overrides)
        except Exception:  # noqa: BLE001 - a bad override: show the defaults
            cfg = compose_config(config_name)
        _print_closed_pipe_ok(
            help_text(
                command, schema, cfg, usage=usage.line, extra=extra_help, config_name=config_name
            )
        )
        raise SystemExit(0)
    multirun = any(a in ("--multirun", "-m") for a in args)
    if not multirun and not any(a.startswith("--") for a in args):
        _check_composes(command, config_name, args)
    swept = _swept_keys(args) if multirun else set()

    def _body(cfg: DictConfig) -> object:
        if not guarded:
            return body(typed(command, cfg))
        from hydra.core.hydra_config import HydraConfig

        overrides = list(HydraConfig.get().overrides.task)
        _job_out(cfg, swept, overrides)
        typed_cfg = typed(command, cfg)  # a missing field is refused before out= is claimed
        with claim_out(
            command, cfg, config_name=config_name, overwrite=overwrite, overrides=overrides
        ):
            return body(typed_cfg)

    @hydra.main(version_base=None, config_path=str(CONF_DIR), config_name=config_name)
    def _app(cfg: DictConfig) -> None:
        result = guard(command, _body, cfg, errors=errors)
        if type(result) is int and result:
            raise SystemExit(result)

    with _private_sweep_dir(multirun, args):
        _app()


def typed(command: str, cfg: DictConfig) -> object:
    """The schema instance of the composed ``cfg`` (what every command body receives); a
    required field still ``???`` is one line and exit 2, naming it."""
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    try:
        return OmegaConf.to_object(cfg)
    except MissingMandatoryValue as e:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        key = getattr(e, "full_key", None) or "a field"
        _exit(command, f"{key}: required; give {key}=VALUE (see --help)")


def _run_dir_as_out(command: str, schema: type, args: Sequence[str]) -> list[str]:
    """``hydra.run.dir=X`` (where a Hydra app writes its outputs) as ``out=X``, so that
    Hydra creates no directory of its own; refused for a command without ``out=``."""
    from dataclasses import fields

    has_out = "out" in {f.name for f in fields(schema)}
    given = [a.split("=", 1)[1] for a in args if a.split("=", 1)[0].lstrip("+") == "out"]
    rest = []
    for arg in args:
        key, _, value = arg.partition("=")
        if key.lstrip("+") != "hydra.run.dir" or not _:
            rest.append(arg)
        elif not has_out:
            _exit(command, f"'{arg}': {command} writes no out= directory for Hydra to name")
        elif given and given[-1] != value:
            _exit(command, f"'{arg}' and 'out={given[-1]}': outputs go to out=; give one")
        elif not given:
            rest.append(f"out={value}")
    return rest


def _swept_keys(args: Sequence[str]) -> set[str]:
    """The keys a ``-m`` command line sweeps (``budget=0.5,1,2``), Hydra's own excluded."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    keys = set()
    for arg in args:
        if "=" in arg and not arg.startswith("-"):
            o = parser.parse_override(arg)
            if o.is_sweep_override() and not o.key_or_group.startswith("hydra"):
                keys.add(o.key_or_group)
    return keys


def _job_out(cfg: DictConfig, swept: set[str], overrides: Sequence[str]) -> None:
    """In a ``-m`` sweep, each job writes ``OUT/<key>=<value>,...`` (its swept keys),
    unless ``out`` is swept itself or interpolated (``out='res/${budget}'``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    if not swept or "out" in swept or cfg.out is None or not str(cfg.out).strip():
        return
    raw = OmegaConf.to_container(cfg, resolve=False)["out"]
    if isinstance(raw, str) and "${" in raw:
        return
    parts = []
    for o in OverridesParser.create().parse_overrides(list(overrides)):
        if o.key_or_group in swept:
            v = o.value()
            v = str(v) if isinstance(v, str | int | float | bool) else o.get_value_element_as_str()
            parts.append(f"{o.key_or_group}={v}".replace("/", "_"))
    cfg.out = str(Path(str(cfg.out)) / ",".join(parts))


@contextlib.contextmanager
def _private_sweep_dir(multirun: bool, args: Sequence[str]):
    """A ``-m`` run's Hydra sweep directory (its ``multirun.yaml`` and one empty folder
    per job; the jobs write under out=) in a temporary directory, removed afterwards,
    so that nothing lands in the current directory; a given ``hydra.sweep.dir`` stands."""
    if not multirun or any(a.lstrip("+").startswith("hydra.sweep.dir=") for a in args):
        yield
        return
    import shutil
    import tempfile

    where = tempfile.mkdtemp(prefix="helpdp-sweep-")
    sys.argv.append(f"hydra.sweep.dir={where}")
    try:
        yield
    finally:
        shutil.rmtree(where, ignore_errors=True)
