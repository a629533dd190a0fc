"""The Python-level guard inside a worker: audit hook, SQLite authorizer, restricted builtins.

Runs in the worker only (standard library; loaded by file path). The rules
themselves are in :mod:`rules`; this module wires them into the interpreter.
It is the first layer, not the boundary (see the package docstring).
"""

from __future__ import annotations

import builtins
import contextlib
import linecache
import os
import sqlite3  # noqa: F401 - imported before any dataset code
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collect.awm.sandbox.rules import Policy


def _refusal(message: str) -> PermissionError:
    return PermissionError(f"sandbox: {message} refused")


class Guard:
    """Everything dataset code runs under. :meth:`activate` installs the audit hook."""

    def __init__(self, policy_mod: types.ModuleType, policy: Policy):
        self.pol = policy_mod
        self.policy = policy
        self._audit = policy.audit  # bound now: later patches of the class do not reach it
        self.authorizer = (
            policy_mod.authorize_env if policy.role == "env" else policy_mod.authorize_readonly
        )
        self._real_import = builtins.__import__
        self.proxies = {"os": self._os_proxy(), "sys": self._sys_proxy()}
        self.builtins = self._safe_builtins()
        self._wrap_sqlite()

    # -- audit hook ----------------------------------------------------------------------
    def audit(self, event: str, args: tuple) -> None:
        message = self._audit(event, args)
        if message is not None:
            raise _refusal(message)

    def activate(self) -> None:
        sys.addaudithook(self.audit)

    # -- SQLite: every connection gets the authorizer and no ATTACH slots ---------------------
    def _wrap_sqlite(self) -> None:
        import _sqlite3
        import sqlite3.dbapi2

        real_connect = sqlite3.connect
        authorizer = self.authorizer

        def guarded_connect(*args, **kwargs):
            conn = real_connect(*args, **kwargs)
            conn.set_authorizer(authorizer)
            with contextlib.suppress(AttributeError, sqlite3.Error):
                conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            return conn

        sqlite3.connect = guarded_connect
        sqlite3.dbapi2.connect = guarded_connect
        _sqlite3.connect = guarded_connect

    # -- module proxies ----------------------------------------------------------------------
    def _os_proxy(self) -> types.ModuleType:
        proxy = types.ModuleType("os", "os module without process-control functions (sandbox)")
        with_dir_fd = {id(f) for f in os.supports_dir_fd}
        for key in dir(os):
            if not self.pol.os_attribute_allowed(key):
                continue
            value = getattr(os, key)
            if callable(value) and id(value) in with_dir_fd:
                value = _no_dir_fd(value)
            setattr(proxy, key, value)
        return proxy

    def _sys_proxy(self) -> types.ModuleType:
        proxy = types.ModuleType("sys", "sys module subset (sandbox)")
        for key in self.pol.SYS_ALLOW:
            if hasattr(sys, key):
                setattr(proxy, key, getattr(sys, key))
        return proxy

    # -- builtins ------------------------------------------------------------------------------
    def _safe_builtins(self) -> dict[str, object]:
        refusal, real_import, proxies = self.pol.import_refusal, self._real_import, None

        def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
            problem = refusal(name, fromlist, level)
            if problem is not None:
                raise ImportError(problem)
            module = real_import(name, globals, locals, fromlist, level)
            if not fromlist:
                return proxies.get(name.partition(".")[0], module)
            return proxies.get(name, module)

        proxies = self.proxies
        safe = {
            key: getattr(builtins, key)
            for key in dir(builtins)
            if key not in self.pol.BUILTINS_DENY
        }
        safe["__import__"] = guarded_import

        def scoped(g: object, frame_globals: dict) -> dict:
            if g is None:
                return frame_globals
            if isinstance(g, dict):
                g["__builtins__"] = safe
            return g

        def safe_exec(source, globals=None, locals=None, /):
            frame = sys._getframe(1)
            g = scoped(globals, frame.f_globals)
            if globals is None and locals is None:
                locals = frame.f_locals
            return builtins.exec(source, g, locals)

        def safe_eval(source, globals=None, locals=None, /):
            frame = sys._getframe(1)
            g = scoped(globals, frame.f_globals)
            if globals is None and locals is None:
                locals = frame.f_locals
            return builtins.eval(source, g, locals)

        safe["exec"], safe["eval"] = safe_exec, safe_eval
        return safe

    def exec_dataset_code(
        self, code: str, module_name: str, filename: str, compiled: types.CodeType | None = None
    ) -> types.ModuleType:
        """Run ``code`` as module ``module_name`` (``compiled``: its code object, compiled
        the same way by an app template)."""
        module = types.ModuleType(module_name)
        module.__dict__["__builtins__"] = self.builtins
        module.__file__ = filename
        sys.modules[module_name] = module
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        if compiled is None:
            compiled = compile(code, filename, "exec", dont_inherit=True)
        builtins.exec(compiled, module.__dict__)
        return module


def _no_dir_fd(fn):
    def call(*args, **kwargs):
        if kwargs.get("dir_fd") is not None:
            raise _refusal(f"os.{fn.__name__} with dir_fd")
        return fn(*args, **kwargs)

    call.__name__ = fn.__name__
    call.__doc__ = fn.__doc__
    return call
