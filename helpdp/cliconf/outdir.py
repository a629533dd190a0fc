"""One command's outputs per ``out=`` directory, recorded, never replaced unasked.

:func:`cliconf.run_app` applies :func:`claim_out` to every command whose schema has an
``out`` field and no ``overwrite`` field of its own (a command that declares
``overwrite``, such as ``collect``, handles its ``out=`` itself):

* ``out=`` empty is an error (not the current directory); ``out=null`` (where a command
  allows it) writes no directory and is not guarded;
* one writer per ``out=`` at a time: a second command into the same directory stops
  with the first one's pid and command (an advisory lock, released when the process
  ends, however it ends; :func:`lock_out`);
* a non-empty ``out=`` is written only when it holds the outputs of the same command
  and the same resolved config (a rerun; afterwards the command says on stderr what it
  replaced), or with ``overwrite=true``; another command's outputs, another config's,
  or files of unknown origin are refused, named, with what to type instead;
* before the command runs, ``OUT/.hydra/`` records it, Hydra's layout: ``config.yaml``
  (the resolved config; ``python -m <command> --config-dir OUT/.hydra --config-name
  config`` re-runs it), ``overrides.yaml`` (the command line) and ``job.yaml`` (the
  command), so a run killed midway is resumed by its rerun, not refused. A run that
  wrote nothing leaves no record (and no empty directory it created);
* the record is written and removed relative to a descriptor of ``OUT``, never through
  a link: ``OUT/.hydra`` or one of its files planted as a symbolic link (or as
  something else than a directory and regular files) is refused, named, before
  anything is written, with or without ``overwrite=true``; each file is written under
  a fresh name (``O_EXCL|O_NOFOLLOW``) and renamed into place, and a run that wrote
  nothing removes only the files it wrote (the same inode), so a link or a file put
  there by someone else is never written through or removed. Any other link below
  ``OUT`` whose target is outside ``OUT`` is refused the same way before the command
  runs (the command's own writes would follow it). Hydra itself writes
  nothing under ``OUT``: every primary config sets ``hydra.run.dir: .`` and
  ``hydra.output_subdir: null``, and :func:`cliconf.run_app` turns
  ``hydra.run.dir=X`` into ``out=X``. The writer lock's directory in the temporary
  directory must be this user's own and no link, and the lock file is opened
  ``O_NOFOLLOW``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import stat
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = ["RECORD", "claim_out", "guards_out", "lock_out", "pop_overwrite", "read_record"]

#: the record of the run that wrote an ``out=`` directory (Hydra's output subdir)
RECORD = ".hydra"
#: the files of the record
RECORD_FILES = ("config.yaml", "overrides.yaml", "job.yaml")
#: a directory opened where it is, not where a link points
_DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: fields that change how a run reports, not what it writes: a rerun may differ in them
PRESENTATION = ("out", "progress", "quiet", "verbose")
OVERWRITE_HELP = [
    "  overwrite=false",
    "    write into an out= holding another command's or another config's outputs, or "
    "files of unknown origin (a rerun of the same config needs no flag)",
]


def guards_out(schema: type) -> bool:
    """Whether :func:`cliconf.run_app` guards ``schema``'s ``out=``."""
    names = {f.name for f in dataclasses.fields(schema)}
    return "out" in names and "overwrite" not in names


def pop_overwrite(command: str, args: Sequence[str]) -> tuple[list[str], bool]:
    """``args`` without ``overwrite=<bool>`` (the guard's own key), and its value."""
    rest, overwrite = [], False
    for arg in args:
        key, _, value = arg.partition("=")
        if key.lstrip("+") != "overwrite" or not _:
            rest.append(arg)
            continue
        if value.lower() not in ("true", "false"):
            print(
                f"{command}: error: 'overwrite' takes a bool (true|false), not {value!r}",
                file=sys.stderr,
            )
            raise SystemExit(2)
        overwrite = value.lower() == "true"
    return rest, overwrite


def _lock_path(out: Path) -> Path:
    """The lock file of ``out``, in a directory of this user's own in the temporary
    directory (refused when it is a link, another user's, or writable by others)."""
    digest = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:24]
    where = Path(tempfile.gettempdir()) / f"helpdp-out-locks-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        where.mkdir(mode=0o700)
    st = os.lstat(where)
    if stat.S_ISLNK(st.st_mode):
        raise FileExistsError(
            f"{where}: a symbolic link; the locks of out= directories are kept in a "
            "directory of this user's own: remove it"
        )
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise FileExistsError(
            f"{where}: not a directory of this user's own that only they can write; the "
            "locks of out= directories are kept there: remove it"
        )
    return where / f"{digest}.lock"


@contextlib.contextmanager
def lock_out(command: str, out: str | os.PathLike) -> Iterator[None]:
    """Hold ``out``'s writer lock (a lock file outside ``out``, in the temporary
    directory, so that a refused run leaves ``out`` untouched); a directory another
    process holds raises ``FileExistsError`` naming it."""
    import fcntl

    path = _lock_path(Path(out))
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise FileExistsError(
            f"{path}: a symbolic link; the lock of out={out} is never opened through a "
            "link: remove it"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileExistsError(f"{path}: not a regular file; the lock of out={out}: remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
            raise FileExistsError(
                f"out={out} is being written by {holder}; wait for it to end or use another out="
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({command})".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def read_record(out: str | os.PathLike) -> dict[str, JSON] | None:
    """``{"command", "config"}`` of the run recorded in ``out``, or None."""
    from omegaconf import OmegaConf

    rec = Path(out) / RECORD
    if not (rec / "job.yaml").is_file() or not (rec / "config.yaml").is_file():
        return None
    try:
        job = OmegaConf.to_container(OmegaConf.load(rec / "job.yaml"))
        config = OmegaConf.to_container(OmegaConf.load(rec / "config.yaml"))
    except Exception:  # noqa: BLE001 - a damaged record is no record
        return None
    if not isinstance(job, dict) or not isinstance(config, dict):
        return None
    config.pop("defaults", None)
    config.pop("hydra", None)
    return {"command": job.get("command"), "config": config}


def _files(out: Path) -> dict[str, tuple[int, int, int]]:
    """Every file below ``out`` but the record: ``{relative path: (inode, size, mtime)}``."""
    found = {}
    for root, dirs, names in os.walk(out):
        if Path(root) == out and RECORD in dirs:
            dirs.remove(RECORD)
        for name in names:
            p = Path(root) / name
            with contextlib.suppress(OSError):
                s = p.lstat()
                found[str(p.relative_to(out))] = (s.st_ino, s.st_size, s.st_mtime_ns)
    return found


def _link_out(out: Path) -> Path | None:
    """The first symbolic link below ``out`` (none followed) whose target is outside
    ``out`` (a dangling one too: writing through it creates its target), or None."""
    root = out.resolve()
    for where, dirs, names in os.walk(out):
        for name in sorted([*dirs, *names]):
            p = Path(where) / name
            if p.is_symlink():
                try:
                    target = p.resolve()
                except (OSError, RuntimeError):  # a loop: nowhere inside out= either
                    return p
                if target != root and root not in target.parents:
                    return p
    return None


def _listing(names: Sequence[str], most: int = 4) -> str:
    names = sorted(names)
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _differences(a: JSON, b: JSON, where: str = "") -> list[str]:
    """The dotted keys whose values differ between two plain configs."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if not where and k in PRESENTATION:
                continue
            out += _differences(a.get(k), b.get(k), f"{where}{k}" if not where else f"{where}.{k}")
        return out
    return [] if a == b else [where]


def _show(value: JSON) -> str:
    """``value`` as one writes it on the command line (``[0.5,1.0]``, ``null``)."""
    if isinstance(value, dict | list | bool) or value is None:
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _lookup(config: JSON, key: str) -> JSON:
    for part in key.split("."):
        if not isinstance(config, dict):
            return None
        config = config.get(part)
    return config


def _refusal(command: str, out: Path, config: dict, present: Sequence[str]) -> str | None:
    """Why ``command`` with ``config`` may not write into ``out`` (None: it may)."""
    tail = "; use another out= or overwrite=true to write there anyway"
    rec = read_record(out)
    if rec is None:
        return (
            f"out={out} is not empty ({_listing(present)}) and holds no record of what "
            f"wrote it ({RECORD}/config.yaml){tail}"
        )
    if rec["command"] != command:
        return f"out={out} holds the outputs of {rec['command']}, not {command}{tail}"
    differ = _differences(rec["config"], config)
    if differ:
        shown = "; ".join(
            f"{k}={_show(_lookup(rec['config'], k))} there, {_show(_lookup(config, k))} here"
            for k in differ[:3]
        )
        more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
        return f"out={out} holds the outputs of another {command} config ({shown}{more}){tail}"
    return None


def _refuse_link(out: Path, path: Path) -> FileExistsError:
    return FileExistsError(
        f"out={out}: {path} is a symbolic link; the record of a run is written there and "
        "never through a link: remove it or use another out="
    )


def _check_record(out: Path) -> None:
    """Refuse a record that is not plain: ``OUT/.hydra`` a link or not a directory, or
    one of :data:`RECORD_FILES` a link or not a regular file (nothing is written)."""
    rec = out / RECORD
    for path, want in ((rec, stat.S_ISDIR), *((rec / n, stat.S_ISREG) for n in RECORD_FILES)):
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat.S_ISLNK(st.st_mode):
            raise _refuse_link(out, path)
        if not want(st.st_mode):
            kind = "a directory" if want is stat.S_ISDIR else "a regular file"
            raise FileExistsError(
                f"out={out}: {path} is not {kind}; the record of a run is written there: "
                "remove it or use another out="
            )


def _open_record(out: Path, out_fd: int) -> int:
    """A descriptor of ``OUT/.hydra`` (made when missing), opened without following a link."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(RECORD, 0o777, dir_fd=out_fd)
    try:
        return os.open(RECORD, _DIR_NOFOLLOW, dir_fd=out_fd)
    except OSError as e:  # a link (or a file) put there since the check
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse_link(out, out / RECORD) from None
        raise


def _put(out: Path, rec_fd: int, name: str, text: str) -> tuple[int, int]:
    """Write ``text`` as ``name`` in the record: a fresh file (``O_EXCL|O_NOFOLLOW``)
    renamed over ``name``, which replaces the name and never writes through it; returns
    the file's ``(device, inode)``."""
    tmp = f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644, dir_fd=rec_fd)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            st = os.fstat(fh.fileno())
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISLNK(os.stat(name, dir_fd=rec_fd, follow_symlinks=False).st_mode):
                raise _refuse_link(out, out / RECORD / name)
        os.replace(tmp, name, src_dir_fd=rec_fd, dst_dir_fd=rec_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=rec_fd)
        raise
    return st.st_dev, st.st_ino


def _write_record(
    out: Path,
    command: str,
    config_name: str,
    config: dict,
    overrides: Sequence[str],
    written: dict[str, tuple[int, int, bytes]],
) -> None:
    """``OUT/.hydra/``: a primary config that re-runs this run, the command line, the
    command; ``written`` gets each file's ``(device, inode, bytes)`` as it lands (what
    :func:`_drop_record` may remove)."""
    from omegaconf import OmegaConf

    rec = out / RECORD
    rerun = f"python -m {command} --config-dir {rec} --config-name config"
    primary = {
        "defaults": [f"{config_name}_schema", {"override hydra/job_logging": "stdout"}, "_self_"],
        "hydra": {"run": {"dir": "."}, "output_subdir": None},
        **config,
    }
    header = f"# the resolved config of the run that wrote {out}; re-run it with\n#   {rerun}\n"
    job = {"command": command, "config_name": config_name, "rerun": rerun}
    texts = {
        "config.yaml": header + OmegaConf.to_yaml(OmegaConf.create(primary)),
        "overrides.yaml": OmegaConf.to_yaml(OmegaConf.create(list(overrides))),
        "job.yaml": OmegaConf.to_yaml(OmegaConf.create(job)),
    }
    out_fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        rec_fd = _open_record(out, out_fd)
        try:
            for name in RECORD_FILES:
                written[name] = (*_put(out, rec_fd, name, texts[name]), texts[name].encode())
        finally:
            os.close(rec_fd)
    finally:
        os.close(out_fd)


def _ours(rec_fd: int, name: str, dev: int, ino: int, data: bytes) -> bool:
    """``name`` in the record is still the file this run wrote: the same inode (a freed
    one is reused at once: also the same bytes), opened without following a link."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=rec_fd
        )
    except OSError:
        return False
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (dev, ino):
            return False
        return fh.read(len(data) + 1) == data


def _drop_record(
    out: Path, created: list[Path], written: Mapping[str, tuple[int, int, bytes]]
) -> None:
    """Remove the record of a run that wrote nothing (the files ``_write_record`` wrote,
    each only while it is the same file: :func:`_ours`), and the directories this run
    created for ``out`` (deepest first) that are empty; nothing through a link."""
    try:
        out_fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        try:
            rec_fd = os.open(RECORD, _DIR_NOFOLLOW, dir_fd=out_fd)
        except OSError:
            rec_fd = None
        if rec_fd is not None:
            try:
                for name, (dev, ino, data) in written.items():
                    if _ours(rec_fd, name, dev, ino, data):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(name, dir_fd=rec_fd)
            finally:
                os.close(rec_fd)
        with contextlib.suppress(OSError):  # not empty: files that are not ours stay
            os.rmdir(RECORD, dir_fd=out_fd)
            for d in created:
                d.rmdir()
    finally:
        os.close(out_fd)


@contextlib.contextmanager
def claim_out(
    command: str,
    cfg: DictConfig,
    *,
    config_name: str,
    overwrite: bool = False,
    overrides: Sequence[str] = (),
) -> Iterator[None]:
    """Run the body of ``with`` as the one writer of ``cfg.out`` (``cfg``: the composed
    config, whatever the command's schema; see the module's docstring); refusals raise ``FileExistsError`` / ``ValueError`` (one line, exit 2
    under :func:`cliconf.guard`)."""
    from omegaconf import OmegaConf

    raw = cfg.out
    if raw is None:
        yield
        return
    if not str(raw).strip():
        raise ValueError("out= is empty: name the directory to write (e.g. out=outputs/run1)")
    out = Path(str(raw))
    config = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else {}
    if isinstance(config, Mapping):
        config = dict(config)
    with lock_out(command, out):
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(f"out={out} is a file; out= names a directory")
        _check_record(out)
        link = _link_out(out) if out.is_dir() else None
        if link is not None:
            raise FileExistsError(
                f"out={out}: {link} is a symbolic link to {os.readlink(link)}, outside out=; "
                "a command never writes through a link out of its out=: remove it or use "
                "another out="
            )
        before = _files(out) if out.is_dir() else {}
        reason = _refusal(command, out, config, list(before)) if before else None
        if reason and not overwrite:
            raise FileExistsError(reason)
        # the directories this run makes for out= (out and missing parents, deepest first)
        created = [d for d in (out, *out.parents) if not d.exists()]
        # recorded before the body runs: a run killed midway (SIGKILL, a lost machine)
        # leaves its record beside its files, so that its rerun resumes them instead of
        # being refused as files of unknown origin
        out.mkdir(parents=True, exist_ok=True)
        written: dict[str, tuple[int, int, bytes]] = {}
        try:
            _write_record(out, command, config_name, config, overrides, written)
            yield
        finally:
            after = _files(out) if out.is_dir() else {}
            if not after:
                _drop_record(out, created, written)
            replaced = [k for k, v in before.items() if after.get(k) != v]
            if replaced:
                why = (
                    f"overwrite=true ({reason.split(';')[0]})"
                    if reason
                    else "a rerun of the same config"
                )
                kept = len(before) - len(replaced)
                print(
                    f"{command}: note: {why}: replaced {_listing(replaced)} in out={out}"
                    + (f" (kept {kept} other files)" if kept else ""),
                    file=sys.stderr,
                )
