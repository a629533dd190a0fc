"""OS-level confinement of a worker: the bubblewrap command line and its seccomp filters.

Every app, verifier and build worker runs as ``bwrap ... python -I -B child.py``:

* ``--unshare-all --unshare-user --uid 65534 --gid 65534 --disable-userns``: its own
  user (nobody inside, no capabilities, no nested user namespaces), PID, network,
  IPC, UTS and cgroup namespaces;
* a mount namespace built from nothing: ``/usr`` (and the ``/lib``, ``/bin`` links),
  ``/etc/ld.so.cache``, the Python installation and the virtualenv (read-only), the
  worker's code (read-only), its own run directory (for apps a private tmpfs of
  ``sandbox.run_dir_mb`` that disappears with the worker, the initial database bound
  read-only inside it; read-write for builds; verifiers see only their inbox,
  read-only) and a minimal read-only ``/dev``. No
  ``/proc``, ``/tmp``, ``/dev/shm``, home directory, the master database, or any
  other run's directory: they do not exist in its view. The root is read-only;
* ``--die-with-parent --new-session``: a worker dies with its parent, and killing
  the worker's PID namespace init kills everything it started;
* a seccomp filter compiled by libseccomp (``pyseccomp``), loaded by bubblewrap
  before Python starts: no ``ptrace``, ``mount``, ``umount2``, ``pivot_root``,
  ``chroot``, ``unshare``, ``setns``, namespace flags on ``clone``, ``keyctl``,
  ``add_key``, ``request_key``, ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring``, kernel modules...; nothing that reaches another process's descriptors
  or memory (``pidfd_getfd``, ``pidfd_send_signal``, ``process_vm_readv/writev``,
  ``kcmp``), no System V or POSIX IPC objects (``shmget``, ``msgget``, ``semget``,
  ``mq_open``...), no ``sethostname``, and ``socket``/``socketpair`` only for
  ``AF_UNIX``, ``AF_INET`` and ``AF_INET6`` (:data:`SOCKET_FAMILIES`); every syscall numbered from 424 (Linux 5.1, the
  same number on every architecture) fails with ENOSYS unless the runtime needs it
  (:data:`NEW_SYSCALLS_ALLOWED`), so syscalls a later kernel adds start closed; and a
  second filter the worker loads itself once its framework is imported: no
  ``execve``/``execveat`` from then on.

  Why not a fresh IPC/UTS namespace per verification: every run of a verifier worker
  shares the worker's namespaces, but no run can put anything into them. IPC objects
  cannot be made (above); the host name needs ``CAP_SYS_ADMIN``, which no worker has
  (and ``sethostname`` is denied as well); the mount view is read-only; the network
  namespace holds only sockets of processes that are killed after each run. A new
  namespace per run would need ``CAP_SYS_ADMIN`` in the fork server (which could then
  remount its own read-only binds) or a new bubblewrap and Python per run (~0.1-0.3 s);
  denying the syscalls costs nothing and holds for apps and builds too. Why not an
  allow list of the whole table: the syscalls CPython, glibc, SQLite and the web
  framework make differ between libc and kernel versions; a missing one kills workers
  with obscure errors on another host. The new-syscall range is where the recent
  attack surface is (io_uring, pidfd_getfd, the mount API), so it is closed by default.

Why bubblewrap. Measured here (Debian 12, 2 shared cores): a confined worker starts
in the time of a bare one plus ~5-10 ms (namespaces, mounts, filter; Python's own
start-up and the framework import dominate), and a request to a running worker costs
nothing extra. It is one Debian package that works unprivileged wherever user
namespaces do, and it builds the mount namespace from an empty root, so whatever is
not listed does not exist for the worker. nsjail does the same but has no Debian 12
package (a source build with protobuf); it was not measured. ``landlock`` +
``pyseccomp`` + ``unshare`` through ctypes would be in-process and hand-assembled:
landlock restricts paths but still shows them, gives no PID namespace (a fork
outlives the worker), needs kernel ABI checks, and the unshare/uid-map/pivot_root
sequence is what bubblewrap already does, reviewed; we use ``pyseccomp`` only to
compile the filters.

The workers are mapped to uid 65534 inside a user namespace. The Python runtime on
this machine lives under ``/root`` (mode 0700), which an unprivileged bwrap cannot
bind, so bubblewrap runs as the caller's uid; inside, the worker is ``nobody`` with
no capabilities, and the namespaces above keep it away from the parent's processes
(``/proc/<pid>/environ``), files and network.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SANDBOX_UID = 65534
PACKAGE_DIR = Path(__file__).resolve().parent
CHILD = PACKAGE_DIR / "child.py"
DATABASE_PY = PACKAGE_DIR.parent / "database.py"

DENIED_SYSCALLS = (
    "ptrace mount umount2 pivot_root chroot unshare setns keyctl add_key request_key bpf "
    "perf_event_open userfaultfd io_uring_setup io_uring_enter io_uring_register "
    "init_module finit_module delete_module kexec_load kexec_file_load reboot swapon "
    "swapoff process_vm_readv process_vm_writev open_by_handle_at name_to_handle_at "
    "fsopen fsmount fsconfig move_mount open_tree fspick acct quotactl lookup_dcookie "
    "syslog settimeofday clock_settime adjtimex clock_adjtime iopl ioperm vhangup "
    # another process's descriptors, memory or identity (a verifier run and its fork server)
    "kcmp pidfd_getfd pidfd_send_signal process_madvise process_mrelease "
    # System V and POSIX IPC objects outlive the process that made them (in the worker's
    # IPC namespace, which every run of a verifier worker shares): none can be made
    "shmget shmat shmdt shmctl msgget msgsnd msgrcv msgctl semget semop semtimedop semctl "
    "ipc mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr "
    "sethostname setdomainname mount_setattr quotactl_fd memfd_secret"
).split()
# Syscall numbers from 424 (Linux 5.1) on are the same on every architecture. Of those,
# only the ones the runtime uses are allowed (by number: older libseccomp releases do not
# know every name); every other one, and every syscall a later kernel adds, fails with
# ENOSYS, so that new kernel interfaces are closed until someone opens them here.
NEW_SYSCALLS = range(424, 512)
NEW_SYSCALLS_ALLOWED = {
    434: "pidfd_open",  # the verifier fork server watches its runs (pidfd_getfd is denied)
    435: "clone3",  # ENOSYS by its own rule: libc falls back to clone, whose flags we see
    436: "close_range",
    437: "openat2",
    439: "faccessat2",
    441: "epoll_pwait2",
    444: "landlock_create_ruleset",
    445: "landlock_add_rule",
    446: "landlock_restrict_self",
    449: "futex_waitv",
    451: "cachestat",
    452: "fchmodat2",
    453: "map_shadow_stack",
    454: "futex_wake",
    455: "futex_wait",
    456: "futex_requeue",
    462: "mseal",
}
EXEC_SYSCALLS = ("execve", "execveat")
# socket families a worker may create: AF_UNIX, AF_INET, AF_INET6 (the app's server on
# the namespace's lo); AF_NETLINK, AF_PACKET, AF_VSOCK (not network-namespaced: it can
# reach a hypervisor), AF_ALG and every other one fail with EAFNOSUPPORT
SOCKET_FAMILIES = (1, 2, 10)
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
CLONE_NAMESPACE_FLAGS = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
    0x00000080,
)
UNAVAILABLE_HINT = (
    "install bubblewrap (sudo apt-get install bubblewrap; `make test` does it when run "
    "as root) and allow unprivileged user namespaces, or run dataset code with only the "
    "Python-level guards by setting sandbox.isolation=python (not a security boundary)"
)


class IsolationUnavailable(RuntimeError):
    """OS-level isolation was asked for and cannot be had here."""


@functools.lru_cache(maxsize=1)
def seccomp_filters() -> tuple[bytes, bytes]:
    """(the start-up filter, the no-exec filter) as BPF programs compiled by libseccomp."""
    try:
        import pyseccomp as sc
    except Exception as e:  # noqa: BLE001 - ImportError, or libseccomp.so.2 missing
        raise IsolationUnavailable(
            f"seccomp: pyseccomp (and libseccomp.so.2) are needed: pip install pyseccomp ({e})"
        ) from None

    def export(f) -> bytes:
        with tempfile.TemporaryFile() as fh:
            f.export_bpf(fh)
            fh.seek(0)
            return fh.read()

    base = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            base.add_rule(sc.ERRNO(errno.EPERM), name)
        except Exception:  # noqa: BLE001, S112 - not a syscall on this architecture
            continue
    denied = {_syscall_number(sc, name) for name in DENIED_SYSCALLS}
    for nr in NEW_SYSCALLS:
        if nr not in NEW_SYSCALLS_ALLOWED and nr not in denied:
            base.add_rule(sc.ERRNO(errno.ENOSYS), nr)
    for flag in CLONE_NAMESPACE_FLAGS:
        base.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    base.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # flags unreadable: libc falls back to clone
    for name in ("socket", "socketpair"):  # only the families a world needs (the 64-bit
        # argument must equal 1, 2 or 10: upper bits set make it greater than 10)
        for family in range(max(SOCKET_FAMILIES)):
            if family not in SOCKET_FAMILIES:
                rule = sc.Arg(0, sc.EQ, family)
                base.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), name, rule)
        rule = sc.Arg(0, sc.GT, max(SOCKET_FAMILIES))
        base.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), name, rule)
    no_exec = sc.SyscallFilter(sc.ALLOW)
    for name in EXEC_SYSCALLS:
        no_exec.add_rule(sc.ERRNO(errno.EPERM), name)
    return export(base), export(no_exec)


def _syscall_number(sc, name: str) -> int | None:
    """The native number of syscall ``name`` (None: not one on this architecture)."""
    try:
        nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
    except Exception:  # noqa: BLE001 - unknown to this libseccomp
        return None
    return nr if isinstance(nr, int) and nr >= 0 else None


def _covered(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@functools.lru_cache(maxsize=1)
def runtime_mounts() -> tuple[tuple[str, str, str], ...]:
    """``(kind, source, dest)`` for the read-only runtime view: /usr, its links, Python."""
    mounts: list[tuple[str, str, str]] = [("ro", "/usr", "/usr")]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            mounts.append(("link", os.readlink(top), top))
        elif os.path.isdir(top):
            mounts.append(("ro", top, top))
    for f in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(f):
            mounts.append(("ro", os.path.realpath(f), f))
    roots = ["/usr", *(m[2] for m in mounts if m[0] == "ro")]
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    candidates.append(str(Path(os.path.realpath(sys.executable)).parent.parent))
    candidates += [p for p in sys.path if "site-packages" in p or "dist-packages" in p]
    for p in sorted({os.path.realpath(c) for c in candidates if c}, key=len):
        if os.path.isdir(p) and not _covered(p, roots) and p != "/":
            mounts.append(("ro", p, p))
            roots.append(p)
    exe = sys.executable  # the virtualenv's link, if any, must resolve inside too
    if not _covered(exe, roots) and os.path.islink(exe):
        parent = os.path.dirname(exe)
        mounts.append(("ro", parent, parent))
    mounts.append(("ro", str(PACKAGE_DIR), str(PACKAGE_DIR)))
    mounts.append(("ro", str(DATABASE_PY), str(DATABASE_PY)))
    return tuple(mounts)


def bwrap_command(
    *,
    workdir: Path,
    rw_dirs: tuple[Path, ...],
    ro_dirs: tuple[Path, ...],
    env: dict[str, str],
    seccomp_fd: int,
    info_fd: int,
    command: list[str],
    tmpfs_dirs: tuple[tuple[Path, int], ...] = (),
) -> list[str]:
    """The ``bwrap`` argv that runs ``command`` confined (see the module docstring).

    ``tmpfs_dirs``: ``(path, bytes)``: a private tmpfs of that size at ``path`` (an app's
    run directory: bounded, and gone with the worker's mount namespace); mounted before
    ``ro_dirs``, so a read-only directory may sit inside it."""
    argv = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user"]
    argv += ["--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    argv += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    for kind, src, dest in runtime_mounts():
        argv += ["--symlink", src, dest] if kind == "link" else ["--ro-bind", src, dest]
    argv += ["--dev", "/dev"]  # first: run directories may live below /dev/shm
    for d, size in tmpfs_dirs:
        argv += ["--size", str(int(size)), "--perms", "0700", "--tmpfs", str(d)]
    for d in ro_dirs:
        argv += ["--ro-bind", str(d), str(d)]
    for d in rw_dirs:
        argv += ["--bind", str(d), str(d)]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += ["--chdir", str(workdir), "--info-fd", str(info_fd)]
    argv += ["--add-seccomp-fd", str(seccomp_fd), "--"]
    return argv + command


@functools.lru_cache(maxsize=1)
def probe() -> str:
    """``bubblewrap X.Y.Z``, after checking that a confined Python starts here.

    Raises :class:`IsolationUnavailable` with what is missing and what to do.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise IsolationUnavailable(
            f"OS isolation is not available: no bwrap found; {UNAVAILABLE_HINT}"
        )
    base, _ = seccomp_filters()
    with tempfile.TemporaryDirectory(prefix="helpdp-probe-") as tmp:
        r, w = os.pipe()
        os.write(w, base)
        os.close(w)
        info_r, info_w = os.pipe()
        argv = bwrap_command(
            workdir=Path(tmp),
            rw_dirs=(Path(tmp),),
            ro_dirs=(),
            env={"PATH": "/usr/bin:/bin"},
            seccomp_fd=r,
            info_fd=info_w,
            command=[sys.executable, "-I", "-S", "-c", "import os; print(os.getuid())"],
        )
        try:
            proc = subprocess.run(
                argv, pass_fds=(r, info_w), capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError) as e:
            proc = None
            detail = str(e)
        finally:
            for fd in (r, info_r, info_w):
                os.close(fd)
        if proc is not None:
            detail = (proc.stderr or proc.stdout).strip()[-300:]
            if proc.returncode == 0 and proc.stdout.strip() == str(SANDBOX_UID):
                version = subprocess.run([bwrap, "--version"], capture_output=True, text=True)
                return version.stdout.strip() or "bubblewrap"
    raise IsolationUnavailable(
        f"OS isolation is not available: bubblewrap cannot start a confined worker here "
        f"({detail or 'no output'}); {UNAVAILABLE_HINT}"
    )


def describe(isolation: str) -> dict[str, object]:
    """What confines dataset code, for the collection's manifest."""
    if isolation == "python":
        return {"mode": "python", "boundary": "none (audit hook, import guard, rlimits only)"}
    try:
        tool = probe()
    except IsolationUnavailable as e:
        return {"mode": "os", "available": False, "error": str(e)}
    return {
        "mode": "os",
        "tool": tool.split()[0],  # its version is host-dependent: the manifest's versions
        "uid": SANDBOX_UID,
        "namespaces": ["user", "mount", "pid", "net", "ipc", "uts", "cgroup"],
        "seccomp": True,
    }
