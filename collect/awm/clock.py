"""The world clock: one fixed "now" for every piece of dataset code in a run.

AWM apps stamp rows with ``datetime.now()``, seed data computes dates with SQLite's
``datetime('now', '+5 days')`` and verifiers compare against the current time. On the
real clock the same episode then writes different databases and texts on different
days, and state ids (hashes of what the agent saw or of the database) change with
the date. So app workers, verifier workers and the database build all run on a
frozen clock, and collection is a pure function of (worlds, config, seeds).

The clock is set below Python, by `libfaketime <https://github.com/wolfcw/libfaketime>`_
(``LD_PRELOAD``; the PyPI package ``libfaketime`` ships the compiled library). It
intercepts ``clock_gettime``/``gettimeofday``/``time``, so it covers Python's
``time.time``, ``datetime.now/utcnow/today`` and ``date.today`` *and* SQLite's own
``'now'`` (``datetime('now')``, ``CURRENT_TIMESTAMP``), which is read by SQLite's C
code. Measured alternative: ``time-machine`` patches Python's functions only, and
SQLite's ``datetime('now')`` still returned the real date under it. The monotonic
clock is left real (``DONT_FAKE_MONOTONIC``), so timeouts and ``asyncio`` work. The
workers run with ``TZ=UTC``.

Where "now" comes from (:meth:`WorldClock.resolve`):

* ``clock=2025-06-12T12:00:00Z`` (any ISO-8601 time; no offset means UTC);
* ``clock=real``: no faking; the workers see the real, moving clock. State ids are
  then not reproducible across days, and the manifest says so;
* unset: the dataset's own "now", stated in ``clock.txt`` beside its ``gen_*.jsonl``
  files (the shipped demo worlds: ``2025-06-12T12:00:00Z``), else
  :data:`DEFAULT_CLOCK`.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from helpdp.cliconf import doc_field
from helpdp.jsonvalue import JSON

__all__ = ["CLOCK_FILE", "DEFAULT_CLOCK", "WorldClock", "clock_field", "faketime_library"]

CLOCK_FILE = "clock.txt"
DEFAULT_CLOCK = "2026-01-01T00:00:00Z"
"""The "now" of AWM data that states none (a fixed constant, so that ids are stable)."""


def clock_field() -> str:
    """The ``clock`` field of every command that runs dataset code (collect, check, serve)."""

    return doc_field(
        "",
        "the worlds' 'now' (ISO-8601, e.g. 2025-06-12T12:00:00Z; frozen for apps, verifiers and "
        "the database build); empty: the dataset's clock.txt, else 2026-01-01T00:00:00Z; real: "
        "the real clock (state ids then change by date)",
    )


def faketime_library() -> Path:
    """The compiled ``libfaketime.so.1`` of the PyPI package ``libfaketime``.

    Found without importing the package (its import pulls in pytz and dateutil).
    """
    if not sys.platform.startswith("linux"):
        raise RuntimeError(
            f"the world clock needs libfaketime's LD_PRELOAD, which works on Linux only "
            f"(this is {sys.platform}); use clock=real, and expect state ids to change by date"
        )
    spec = importlib.util.find_spec("libfaketime")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the world clock needs the PyPI package libfaketime (pip install libfaketime, or "
            "the project's env extra); or pass clock=real"
        )
    lib = Path(list(spec.submodule_search_locations)[0]) / "vendor/libfaketime/src/libfaketime.so.1"
    # resolved: the sandbox mounts real paths only, so a venv reached through a symlink
    # (a CI cache) would hand the workers an LD_PRELOAD path that is not there
    lib = lib.resolve()
    if not lib.is_file():
        raise RuntimeError(f"libfaketime is installed but {lib} is missing; reinstall it")
    return lib


def _parse(text: str, where: str) -> _dt.datetime:
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        t = _dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{where}: {text.strip()!r} is not an ISO-8601 time like 2025-06-12T12:00:00Z "
            "(or 'real')"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.astimezone(_dt.timezone.utc).replace(microsecond=0)


@dataclass(frozen=True)
class WorldClock:
    """The "now" that dataset code sees: fixed (``now``) or the real clock (``now=None``).

    ``source`` says where it came from: ``config``, ``dataset`` (``clock.txt``),
    ``default`` (:data:`DEFAULT_CLOCK`) or ``real``.
    """

    now: _dt.datetime | None
    source: str = "config"

    @classmethod
    def fixed(cls, when: str | _dt.datetime, source: str = "config") -> WorldClock:
        t = when if isinstance(when, _dt.datetime) else _parse(when, "clock")
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return cls(t.astimezone(_dt.timezone.utc).replace(microsecond=0), source)

    @classmethod
    def real(cls) -> WorldClock:
        return cls(None, "real")

    @classmethod
    def resolve(cls, spec: WorldClock | str | None, worlds_dir: str | Path | None) -> WorldClock:
        """The clock of ``clock=spec`` for the dataset in ``worlds_dir`` (see the module doc)."""
        if isinstance(spec, WorldClock):
            return spec
        text = "" if spec is None else str(spec).strip()
        if text.lower() == "real":
            return cls.real()
        if text:
            return cls.fixed(_parse(text, "clock"), "config")
        if worlds_dir is not None:
            path = Path(worlds_dir) / CLOCK_FILE
            if path.is_file():
                return cls.fixed(_parse(path.read_text(encoding="utf-8"), str(path)), "dataset")
        return cls.fixed(_parse(DEFAULT_CLOCK, "DEFAULT_CLOCK"), "default")

    @property
    def is_fixed(self) -> bool:
        return self.now is not None

    def iso(self) -> str:
        """``2025-06-12T12:00:00Z``, or ``real``: the value that reproduces this clock."""
        return "real" if self.now is None else self.now.strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def epoch(self) -> int | None:
        return None if self.now is None else int(self.now.timestamp())

    def worker_env(self) -> dict[str, str]:
        """Environment variables that put a worker process on this clock."""
        env = {"TZ": "UTC"}
        if self.now is None:
            return env
        env.update(
            LD_PRELOAD=str(faketime_library()),
            FAKETIME=self.now.strftime("%Y-%m-%d %H:%M:%S"),  # absolute: frozen
            DONT_FAKE_MONOTONIC="1",
            # Without this, waits on condition variables that use the monotonic clock (the
            # GIL's among them) time out at once: threads spin, measured 5x slower.
            FAKETIME_FORCE_MONOTONIC_FIX="0",
        )
        return env

    def check(self, observed: dict[str, JSON] | None, who: str) -> None:
        """Raise unless a worker's reported ``{"python": t, "sqlite": t}`` shows this clock."""
        if self.now is None:
            return
        observed = observed or {}
        want = self.epoch
        for name in ("python", "sqlite"):
            got = observed.get(name)
            if not isinstance(got, (int, float)) or abs(float(got) - want) > 1.0:
                raise RuntimeError(
                    f"{who}: the world clock is not in effect ({name} reads {got!r}, expected "
                    f"{self.iso()}); libfaketime's LD_PRELOAD did not load"
                )

    def describe(self) -> dict[str, JSON]:
        """What ``manifest.json`` records under ``source.clock``."""
        out: dict[str, JSON] = {
            "now": self.iso(),
            "source": self.source,
            "reproducible": self.now is not None,
        }
        if self.now is not None:
            try:
                out["library"] = f"libfaketime {importlib.metadata.version('libfaketime')}"
            except importlib.metadata.PackageNotFoundError:
                out["library"] = "libfaketime"
        else:
            out["note"] = "clock=real: dates written by apps and seed data follow the real "
            out["note"] += "time, so state ids differ between collections run on different days"
        return out
