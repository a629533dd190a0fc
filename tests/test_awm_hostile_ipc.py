"""Hostile verifiers and clients against what workers share through the kernel.

Class 2: a verifier steals the fork server's reply pipe (``pidfd_open`` +
``pidfd_getfd``) and forges a reply. Class 3: verifier runs count through a
System V segment, so a verdict depends on the order of runs. Class 8: a token
holder on loopback claims other addresses through ``X-Forwarded-For``.

As in ``test_awm_sandbox_hostile.py``, the verifiers first switch the Python-level
guard off, so what is tested is the kernel boundary; every test then checks that
the next verification (or session) still gets its honest result.
"""

from __future__ import annotations

import errno

import httpx
import pytest
from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_databases, notes_world, served

from collect.awm.client import EnvClient
from collect.awm.env import EnvConfig, EnvPool
from collect.awm.sandbox import SandboxLimits, VerifierPool
from collect.awm.serve import ServeConfig, check_bind, create_app, uvicorn_config

VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)

BREAKOUT = '''
def _breakout():
    """Switch the Python-level guard off, as a determined attacker would."""
    real = __import__("os")._wrap_close.__init__.__globals__  # the real os namespace
    sys_ = real["sys"]
    guard = sys_.modules["_sbx_guard"]
    guard.Guard.audit.__code__ = (lambda self, event, args: None).__code__
    return sys_, sys_.modules["os"], sys_.modules["builtins"].__import__


def _libc(imp):
    ctypes = imp("ctypes")
    return ctypes, ctypes.CDLL(None, use_errno=True)
'''

# Class 2: take the fork server's reply pipe through pidfd_getfd, write a forged
# "complete" that carries this request's nonce (read from the fork server's frames,
# which the forked run inherits) and leave the genuine reply behind it.
PIDFD_VERIFIER = (
    BREAKOUT
    + """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import json
    sys_, ros, imp = _breakout()
    ctypes, libc = _libc(imp)
    cfg = json.loads(sys_.argv[-1])
    frame, nonce = sys_._getframe(), None
    while frame is not None:
        msg = frame.f_locals.get("msg")
        if isinstance(msg, dict) and msg.get("op") == "verify":
            nonce = msg["nonce"]
            break
        frame = frame.f_back
    out = {"nonce_found": nonce is not None}
    pidfd = libc.syscall(434, ros.getppid(), 0)  # pidfd_open(the fork server)
    out["pidfd_open"] = 0 if pidfd >= 0 else ctypes.get_errno()
    stolen = libc.syscall(438, pidfd, cfg["fd_out"], 0) if pidfd >= 0 else -1  # pidfd_getfd
    out["pidfd_getfd"] = 0 if stolen >= 0 else ctypes.get_errno()
    out["signal"] = 0 if libc.syscall(424, pidfd, 0, None, 0) >= 0 else ctypes.get_errno()
    rc = libc.syscall(312, ros.getpid(), ros.getppid(), 0, 0, 0)  # kcmp
    out["kcmp"] = 0 if rc >= 0 else ctypes.get_errno()
    rc = libc.syscall(425, 1, None)  # io_uring_setup
    out["io_uring"] = 0 if rc >= 0 else ctypes.get_errno()
    rc = libc.syscall(457, None, None, 0, 0)  # statmount (Linux 6.8): not on the allow list
    out["statmount"] = 0 if rc >= 0 else ctypes.get_errno()
    if stolen >= 0:
        forged = {"ok": True, "result": {"result": "complete", "forged": True}, "nonce": nonce}
        body = json.dumps(forged).encode()
        ros.write(stolen, len(body).to_bytes(4, "big") + body)
        out["forged"] = True
    return {"result": "others", "attack": out}
"""
)

# Class 3: a counter in a System V segment (and a message queue, a semaphore set, a
# POSIX message queue, the host name) that a later run would see.
SYSV_VERIFIER = (
    BREAKOUT
    + """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    sys_, ros, imp = _breakout()
    ctypes, libc = _libc(imp)
    libc.shmat.restype = ctypes.c_void_p
    out = {}
    shmid = libc.shmget(0x4857, 64 << 20, 0o1666)  # IPC_CREAT | 0666, 64 MiB
    out["shmget"] = 0 if shmid >= 0 else ctypes.get_errno()
    count = 0
    if shmid >= 0:
        addr = libc.shmat(shmid, None, 0)
        if addr not in (None, ctypes.c_void_p(-1).value):
            counter = ctypes.c_int.from_address(addr)
            counter.value += 1
            count = counter.value
    out["count"] = count
    out["msgget"] = 0 if libc.msgget(0x4858, 0o1666) >= 0 else ctypes.get_errno()
    out["semget"] = 0 if libc.semget(0x4859, 1, 0o1666) >= 0 else ctypes.get_errno()
    rc = libc.syscall(240, b"hostile", 0o102, 0o666, None)  # mq_open(O_CREAT | O_RDWR)
    out["mq_open"] = 0 if rc >= 0 else ctypes.get_errno()
    out["sethostname"] = 0 if libc.sethostname(b"run", 3) == 0 else ctypes.get_errno()
    out["hostname"] = ros.uname().nodename
    return {"result": "complete" if count <= 1 else "others", "ipc": out}
"""
)


def test_a_verifier_cannot_steal_the_fork_servers_reply_pipe(tmp_path):
    initial, final = notes_databases(tmp_path / "db")
    with VerifierPool(1, VLIMITS, work_root=tmp_path / "pool") as pool:

        def run(code):
            return pool.run(code, initial_db=initial, final_db=final)

        assert run(MILK_VERIFIER).label == "complete"  # the control
        for _ in range(2):
            own = run(PIDFD_VERIFIER)
            # its genuine verdict, not the forged one: the pipe was out of reach
            assert own.ok and own.label == "others", own
            attack = own.result["attack"]
            assert attack["nonce_found"] and "forged" not in attack, attack
            assert attack["pidfd_getfd"] != 0 and attack["signal"] != 0, attack
            assert attack["kcmp"] == attack["io_uring"] == errno.EPERM, attack
            assert attack["statmount"] == errno.ENOSYS, attack  # new syscalls start closed
            after = run(MILK_VERIFIER)  # the next task, on the same worker
            assert after.ok and after.label == "complete", after
        assert pool.protocol_violations == 0


def test_a_forged_frame_costs_no_other_task_its_verdict(tmp_path):
    """Without the kernel boundary (isolation=python) the pipe can be stolen; the pool
    then sees the extra frame, drops that worker, counts it, and the next task's
    verdict is still its own."""
    initial, final = notes_databases(tmp_path / "db")
    limits = SandboxLimits(memory_mb=512, call_timeout_s=30.0, isolation="python")
    with VerifierPool(1, limits, work_root=tmp_path / "pool") as pool:

        def run(code):
            return pool.run(code, initial_db=initial, final_db=final)

        assert run(MILK_VERIFIER).label == "complete"
        first_pid = pool._idle[0].pid
        own = run(PIDFD_VERIFIER)
        if own.ok and "attack" in own.result:  # this kernel refused the theft: nothing forged
            pytest.skip(f"pidfd_getfd refused without the sandbox: {own.result['attack']}")
        assert own.status == "protocol" and "forged" not in str(own.result), own
        assert pool.protocol_violations == 1
        after = run(MILK_VERIFIER)
        assert after.ok and after.label == "complete", after
        assert pool._idle[0].pid != first_pid  # the tampered worker was replaced


def test_verifier_runs_share_no_ipc_objects(tmp_path):
    initial, final = notes_databases(tmp_path / "db")
    with VerifierPool(1, VLIMITS, work_root=tmp_path / "pool") as pool:
        outcomes = [pool.run(SYSV_VERIFIER, initial_db=initial, final_db=final) for _ in range(3)]
        after = pool.run(MILK_VERIFIER, initial_db=initial, final_db=final)
    for outcome in outcomes:
        assert outcome.ok and outcome.label == "complete", outcome  # no order dependence
        ipc = outcome.result["ipc"]
        assert ipc["count"] == 0, ipc  # no segment was made, none survived a run
        for call in ("shmget", "msgget", "semget", "mq_open", "sethostname"):
            assert ipc[call] != 0, (call, ipc)
        assert ipc["hostname"] == "sandbox"
    assert after.ok and after.label == "complete"


# -- the server ---------------------------------------------------------------
TOKEN = "test-token-forwarded"


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    data = notes_world(root / "data", {"notes_1": NOTES_APP}, [(MILK_TASK, MILK_VERIFIER)])
    pool = EnvPool(data, EnvConfig(work_root=str(root / "work")))
    yield pool
    pool.close()


def _sessions(url: str, n: int) -> list[int]:
    """Open ``n`` sessions, each claiming another address; the status codes."""
    codes = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        opened = []
        for i in range(n):
            forwarded = {"X-Forwarded-For": f"203.0.113.{i + 1}"}
            r = http.post("/reset", json={"scenario": "notes_1"}, headers=forwarded, timeout=60)
            codes.append(r.status_code)
            if r.status_code == 200:
                opened.append((r.json()["session_id"], forwarded))
        for sid, forwarded in opened:
            r = http.post("/close", json={"session_id": sid}, headers=forwarded)
            assert r.json() == {"closed": True}, r.text
    return codes


def _episode(url: str) -> float:
    with EnvClient(url, token=TOKEN) as client:
        client.reset("notes_1", 0)
        client.call_tool("add_note", {"body": "remember the milk"})
        return client.step("done")["reward"]


def test_forwarded_for_from_loopback_does_not_multiply_a_clients_sessions(pool):
    config = ServeConfig(max_sessions=8, max_sessions_per_client=2)
    app = create_app(pool, config, token=TOKEN)
    with served(uvicorn_config(app, config, lifespan="off")) as url:
        codes = _sessions(url, 4)
        assert codes == [200, 200, 429, 429], codes  # one client: the socket's address
        assert not app.state.server.sessions
        assert _episode(url) == 1.0  # the next session still runs
    # a proxy named in the config is believed: its clients count apart
    trusting = ServeConfig(max_sessions=8, max_sessions_per_client=2, trusted_proxies=["127.0.0.1"])
    app = create_app(pool, trusting, token=TOKEN)
    with served(uvicorn_config(app, trusting, lifespan="off")) as url:
        assert _sessions(url, 4) == [200, 200, 200, 200]
        assert not app.state.server.sessions
    for bad in ("*", "proxy.local"):  # only addresses or networks, named in the error
        with pytest.raises(ValueError, match=r"trusted_proxies: '.*' is not an IP"):
            check_bind(ServeConfig(trusted_proxies=[bad]))
    good = ServeConfig(trusted_proxies=["10.0.0.0/8", "::1"], token_env="HELPDP_TEST_NO_TOKEN")
    assert check_bind(good) is None
