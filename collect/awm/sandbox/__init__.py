"""Worker processes that run untrusted dataset code (AWM apps, verifiers, database builds).

Nothing from a dataset runs in the caller's process. A :class:`Worker` is a
separate ``python -I -B collect/awm/sandbox/child.py`` that imports only the
standard library (and, for apps, the web framework) and talks to the parent
over two private pipes with length-prefixed JSON frames (:mod:`.framing`).

Layers, outermost first:

1. **The kernel** (``isolation=os``, the default; :mod:`.confine`). Every worker
   runs under bubblewrap: uid 65534 in a user namespace without capabilities,
   its own PID, network, IPC and UTS namespaces, a mount namespace that holds
   only the Python runtime (read-only), its code (read-only) and its own run
   directory, a seccomp filter (no ptrace, mount, unshare/setns, keyring, bpf,
   perf; nothing that reaches another process's descriptors or memory: pidfd_getfd,
   process_vm_*, kcmp; no System V or POSIX IPC objects and no host name, so the IPC
   and UTS namespaces stay empty; every syscall newer than Linux 5.1 but a short
   allow list fails with ENOSYS; no execve once started), hard rlimits equal to the
   soft ones.
   When bubblewrap cannot confine a worker here, dataset code is refused with
   one message; ``sandbox.isolation=python`` opts out explicitly.
2. **The process.** A wall-clock limit per request; a worker that times out,
   crashes, runs out of memory or breaks the protocol (a frame that does not
   decode, is too large or nests too deeply; a reply without the request's
   random nonce) is killed with everything it started, and replaced.
3. **The Python-level guard** (:mod:`.guard`, rules in the pure :mod:`.rules`):
   an audit hook refusing files outside the worker's directories, processes,
   sockets and SQLite extensions; restricted builtins and imports; a SQLite
   authorizer (no ATTACH; read-only for verifiers). It gives clear errors for
   plain attempts; it is not a boundary.

Verifier workers are fork servers (:mod:`.ops`): each run is a fresh child of a
process that never ran dataset code, cannot reach the control pipe (closed in the
child, and no syscall leads back to it), leaves nothing in the kernel for the next
run (no IPC objects can be made, every process it started is killed before the
answer goes back), and its verdict is fenced: a forged or extra frame on the reply
channel kills the worker, is counted, and costs only that run its verdict
(:class:`VerifierPool`).

App workers are, by default (``sandbox.start=fork``), children of an app template
(:mod:`.zygote`, :mod:`.fork`): a worker started and confined exactly like an app
worker, which imports the web framework, never runs dataset code and forks one child
per episode; the child gets two new pipes and keeps no other descriptor, loads the
app and serves the episode; before the next fork every process of the namespace but
the template is killed and every file of the run directory removed.
``sandbox.start=exec`` starts a new worker per episode instead.

The parent: :mod:`.worker` (:class:`Worker`, :class:`AppWorker`), :mod:`.zygote`
(:class:`AppZygote`), :mod:`.verifier` (:class:`VerifierPool`), :mod:`.files`
(scratch directories, reading what workers wrote). The child: :mod:`.child`
(``main``), :mod:`.fork` (the template), :mod:`.ops`, :mod:`.guard`, :mod:`.rules`,
:mod:`.framing`.
"""

from __future__ import annotations

from collect.awm.sandbox.confine import IsolationUnavailable, describe
from collect.awm.sandbox.files import (
    UnsafeDirectory,
    copy_file_nofollow,
    default_work_root,
    ensure_private_dir,
    private_mkdtemp,
)
from collect.awm.sandbox.framing import MAX_MESSAGE_BYTES
from collect.awm.sandbox.verifier import VerifierOutcome, VerifierPool
from collect.awm.sandbox.worker import (
    AppWorker,
    SandboxError,
    SandboxLimits,
    Worker,
    check_isolation,
)
from collect.awm.sandbox.zygote import AppZygote, ForkedApp

#: the sandbox's errors that a command reports as one line (``cliconf.run_app(errors=)``)
COMMAND_ERRORS = (SandboxError, IsolationUnavailable, UnsafeDirectory)

__all__ = [
    "COMMAND_ERRORS",
    "KNOWN_LIMITATIONS",
    "MAX_MESSAGE_BYTES",
    "AppWorker",
    "AppZygote",
    "ForkedApp",
    "IsolationUnavailable",
    "SandboxError",
    "SandboxLimits",
    "UnsafeDirectory",
    "VerifierOutcome",
    "VerifierPool",
    "Worker",
    "check_isolation",
    "copy_file_nofollow",
    "default_work_root",
    "describe",
    "ensure_private_dir",
    "private_mkdtemp",
]

KNOWN_LIMITATIONS = (
    "The Python-level guard (audit hook, import guard, restricted builtins, SQLite "
    "authorizer) can be switched off by code that reaches the interpreter's internals "
    "(frame walking, subclass lists, __code__ assignment). It is a first layer for clear "
    "errors; the boundary is the kernel (isolation=os). With isolation=python there is no "
    "boundary: use it only for data you trust.",
    "Inside its namespaces a broken-out worker can still do anything its own view allows: "
    "rewrite its own run directory (an app's working database, its exported database, its "
    "log), spin on its CPU and memory up to the rlimits, and answer its own requests "
    "wrongly. Its own episode's observations and outcome are therefore only as trustworthy "
    "as its app; other episodes, tasks, the master database and the parent are not reachable.",
    "The kernel is shared: a local privilege escalation through a syscall the seccomp filter "
    "allows escapes every layer. The filter denies by name the syscalls that reach other "
    "processes, IPC objects, namespaces, mounts, keyrings, BPF, io_uring and perf, and every "
    "syscall newer than Linux 5.1 but a short allow list; the older table is otherwise "
    "allowed (an allow list of it would tie the workers to one libc). bubblewrap runs as "
    "the caller's uid when the Python runtime is not reachable by nobody (here: under "
    "/root), so the worker is uid 65534 only inside its user namespace.",
    "Resource use is bounded per worker (RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE, "
    "wall clock, a cgroup per worker where the machine allows one: pids and memory with its "
    "tmpfs run directory), not machine-wide: many workers at their limits can still exhaust "
    "the host. Without a writable cgroup, as root, no process-count limit holds (the kernel "
    "exempts uid 0 from RLIMIT_NPROC); the manifest's source.isolation.limits says so.",
    "With sandbox.start=fork (the default for fresh apps), the children of one app "
    "template run one after another in its namespaces (network, IPC, UTS, mount, PID), not "
    "in new ones: what a namespace keeps beyond its processes and files is shared. Nothing "
    "can be created in the IPC and UTS namespaces (seccomp), sockets die with their "
    "processes and the run directory is emptied; the template parses and compiles the "
    "app's source (CPython's compiler, none of it runs there), so a compiler bug that the "
    "source triggers would reach every later child of that template.",
    "Verifiers read the databases through SQLite in their own process; a verifier that "
    "hangs the SQLite C code is stopped only by the wall clock (the per-episode verifier "
    "budget).",
)
