"""An app template's children, attacked from a dataset: what one episode's child can leave
for the next child of the same template (``sandbox.start=fork``).

Class 1, no breakout (plain ``os`` calls the Python-level guard allows in the run
directory): a child tags its run directory with a ``user.*`` extended attribute, writes
to its log and makes files; the next child reads the tag, the log's size at its start
and the inode number of a new file, which counted what earlier children wrote. Each
child now gets a run directory of its own (a tmpfs no other child could reach), and a
log of its own.

Class 2, after the Python-level breakout: the template kept the previous child's exit
status (a byte the child chose) in its memory, which the next child inherits. The
template now never waits on a child: a reaper between them collects the status and
hands it to the parent over a pipe the template does not hold.

Every test then checks that the next episode still solves its task.
"""

from __future__ import annotations

import json
import os

import pytest
from awm_helpers import MILK_TASK, MILK_VERIFIER, NOTES_APP, notes_world

from collect.awm.dataset import AWMDataset
from collect.awm.env import AWMEnv, EnvConfig
from collect.awm.protocol import format_call_tool
from collect.awm.sandbox import SandboxError, SandboxLimits, zygote
from collect.awm.sandbox.zygote import ForkedApp

LIMITS = SandboxLimits(memory_mb=1024, call_timeout_s=30.0, start_timeout_s=60)
VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)
EXIT_CODE = 167  # the byte a child chooses as its exit status

HOSTILE_TAIL = f'''

@app.get("/x/look", operation_id="x_look")
def x_look():
    """What an earlier child may have left: tags, the log's size, the inode counter."""
    tags = {{name: os.getxattr(".", name).decode() for name in os.listxattr(".")}}
    with open("probe.txt", "w") as fh:
        fh.write("x")
    ino = os.stat("probe.txt").st_ino
    os.unlink("probe.txt")
    above = {{}}
    for name, attempt in (("list", lambda: os.listdir("..")),
                          ("write", lambda: open("../planted.txt", "w"))):
        try:
            attempt()
            above[name] = "allowed"
        except OSError as e:
            above[name] = type(e).__name__
    return {{"tags": tags, "log_bytes": os.fstat(2).st_size, "ino": ino,
            "files": sorted(os.listdir(".")), "above": above}}


@app.get("/x/leave", operation_id="x_leave")
def x_leave():
    """Leave a message for the next child: a tag, log bytes, a count in inode numbers."""
    os.setxattr(".", "user.carry", b"child served 3 requests: add_note, add_note, list")
    os.write(2, b"#" * 5000)
    for i in range(40):
        with open(f"count-{{i}}", "w"):
            pass
    return {{"left": True}}


def _breakout():
    """Switch the Python-level guard off, as a determined attacker would."""
    real = os._wrap_close.__init__.__globals__
    sys_ = real["sys"]
    sys_.modules["_sbx_guard"].Guard.audit.__code__ = (lambda self, event, args: None).__code__
    return sys_, sys_.modules["os"], sys_.modules["builtins"].__import__


@app.get("/x/quit", operation_id="x_quit")
def x_quit():
    sys_, ros, imp = _breakout()
    ros._exit({EXIT_CODE})


def _numbers(value, depth=0):
    """Every int in plain data (dicts, lists, tuples, sets), as deep as 6 levels."""
    if isinstance(value, bool) or depth > 6:
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [n for v in value for n in _numbers(v, depth + 1)]
    return []


@app.get("/x/peek", operation_id="x_peek")
async def x_peek():
    """The template's state, as this child inherited it (the fork loop's frames)."""
    sys_, ros, imp = _breakout()
    found = None
    for frame in sys_._current_frames().values():
        while frame is not None and found is None:
            t = frame.f_locals.get("t")
            if type(t).__name__ == "Template":
                found = t
            frame = frame.f_back
    state = {{k: v for k, v in vars(found).items() if isinstance(v, (int, dict, list, tuple))}}
    above = {{}}  # the other children's run directories, with the guard off: the kernel's answer
    for name, attempt in (("list", lambda: ros.listdir("..")),
                          ("chmod", lambda: ros.chmod("..", 0o700)),
                          ("write", lambda: ros.open("../planted.txt", ros.O_CREAT | ros.O_WRONLY))):
        try:
            attempt()
            above[name] = "allowed"
        except OSError as e:
            above[name] = imp("errno").errorcode[e.errno]
    return {{"found": found is not None, "numbers": _numbers(state), "ended": repr(found.ended),
            "parent": ros.getppid(), "above": above}}
'''


def _notes_env(root) -> AWMEnv:
    """The notes world with the hostile tools; every episode a child of the same template
    (no prestart on a second one)."""
    data = notes_world(
        root / "data", {"notes_1": NOTES_APP + HOSTILE_TAIL}, [(MILK_TASK, MILK_VERIFIER)]
    )
    dataset = AWMDataset(data)
    cfg = EnvConfig(sandbox=LIMITS, verifier_sandbox=VLIMITS, prestart_app=False)
    return AWMEnv(dataset.get("notes_1"), cfg, work_root=root / "work", clock=dataset.clock())


@pytest.fixture(scope="module")
def one_template(tmp_path_factory):
    env = _notes_env(tmp_path_factory.mktemp("hostile-fork"))
    yield env
    env.close()


def _tool(env: AWMEnv, tool: str) -> dict:
    result = env.step(format_call_tool(tool, {}))
    assert result.info["status_code"] == 200, result.observation
    return json.loads(result.observation)


def _solve(env: AWMEnv) -> str:
    env.reset(0)
    assert not env.step(format_call_tool("add_note", {"body": "remember the milk"})).done
    return env.step("Done.").info["outcome"]


def _template(env: AWMEnv):
    (zygote,) = env._zygotes.values()
    return zygote


def test_a_child_leaves_nothing_in_the_next_childs_run_directory_or_log(one_template):
    env = one_template
    looks, run_dirs = [], []
    for _ in range(3):
        env.reset(0)
        assert isinstance(env.app, ForkedApp)
        if run_dirs:  # the last child's run directory, emptied (its memory given back)
            assert os.listdir(_template(env).worker.host_path(run_dirs[-1])) == []
        run_dirs.append(env.app.worker.run_dir)
        looks.append(_tool(env, "x_look"))
        assert _tool(env, "x_leave") == {"left": True}
    # was: the tag of the previous child, a log 5000 bytes longer and an inode number 41
    # higher in every episode
    assert looks == [looks[0]] * 3, looks
    assert looks[0]["tags"] == {} and looks[0]["files"] == ["work.db"]
    # the other children's run directories: not listed, and nothing can be put beside them
    assert looks[0]["above"] == {"list": "PermissionError", "write": "PermissionError"}, looks
    assert _template(env).starts == 1 and env.app_starts == 3  # one template, three children
    assert len(set(run_dirs)) == 3
    assert _solve(env) == "complete"


def test_the_template_never_holds_a_childs_exit_status(one_template):
    env = one_template
    env.reset(0)
    template = _template(env)
    starts = template.starts
    # the status reaches the parent (the episode's error names it) ...
    with pytest.raises(SandboxError, match=f"worker exited .code {EXIT_CODE}."):
        env.app.request("GET", "/x/quit")
    env.reset(0)
    peek = _tool(env, "x_peek")
    assert peek["found"], peek
    # ... but not the template, nor the next child (was: ended = {n: {'status': 42752, ...}})
    assert EXIT_CODE not in peek["numbers"] and EXIT_CODE << 8 not in peek["numbers"], peek
    assert "status" not in peek["ended"], peek
    assert peek["parent"] != template.worker.hello["pid"]  # a reaper's child, not the template's
    assert peek["above"] == {"list": "EACCES", "chmod": "EROFS", "write": "EROFS"}, peek["above"]
    assert template.starts == starts  # the same template forked it
    assert _solve(env) == "complete"


def test_a_template_whose_run_directories_are_used_up_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setattr(zygote, "RUN_DIRS", 2)
    env = _notes_env(tmp_path)
    try:
        for _ in range(3):
            env.reset(0)
            assert _tool(env, "x_look")["tags"] == {}
            _tool(env, "x_leave")
        # two children on the first template, the third on a new one
        assert _template(env).starts == 2 and env.app_starts == 3
        assert _solve(env) == "complete"
    finally:
        env.close()
