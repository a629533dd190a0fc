"""Long-lived processes that many episodes or worlds share, attacked from a dataset.

Class 3 (verifier fork servers across worlds): a fork server receives every run's code in
its own memory, which its next child inherits; a run of one world must therefore never be
a child of a fork server that served another world. Each run here reports which worker
process it is a child of (the worker's start nonce, in the configuration every child
inherits) after switching the Python-level guard off; the runs of one world share a
worker (the pool still reuses its fork servers), another world's runs never do, and the
next honest verification still gets its verdict.
"""

from __future__ import annotations

from types import SimpleNamespace

from awm_helpers import MILK_VERIFIER, notes_databases

from collect.awm.sandbox import SandboxLimits, VerifierPool
from collect.awm.verification import verifier_world

VLIMITS = SandboxLimits(memory_mb=512, call_timeout_s=30.0)

BREAKOUT = '''
def _breakout():
    """Switch the Python-level guard off, as a determined attacker would."""
    real = __import__("os")._wrap_close.__init__.__globals__  # the real os namespace
    sys_ = real["sys"]
    guard = sys_.modules["_sbx_guard"]
    guard.Guard.audit.__code__ = (lambda self, event, args: None).__code__
    return sys_, sys_.modules["os"], sys_.modules["builtins"].__import__
'''

# which fork server this run is a child of: the start nonce of its worker's configuration
WHOSE_CHILD = (
    BREAKOUT
    + """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    import json
    sys_, ros, imp = _breakout()
    cfg = json.loads(sys_.argv[-1])
    return {"result": "others", "server": cfg["nonce"], "world": WORLD}
"""
)


def test_verifiers_of_two_worlds_never_share_a_fork_server(tmp_path):
    initial, final = notes_databases(tmp_path / "db")
    servers: dict[str, list[str]] = {"A": [], "B": []}
    with VerifierPool(1, VLIMITS, work_root=tmp_path / "pool") as pool:
        for world in ("A", "B", "A", "A", "B"):
            code = f"WORLD = {world!r}\n" + WHOSE_CHILD
            outcome = pool.run(code, initial_db=initial, final_db=final, world=world)
            assert outcome.status == "ok", outcome.message
            assert outcome.result["world"] == world
            servers[world].append(outcome.result["server"])
        # one world's runs in a row share a fork server; the two worlds never share one
        assert servers["A"][1] == servers["A"][2]
        assert not set(servers["A"]) & set(servers["B"])
        assert len(set(servers["A"] + servers["B"])) == 4  # A, B, A (twice), B
        # without a world, one verifier source is one world: another source gets its own
        plain = [
            pool.run(f"WORLD = {i}\n" + WHOSE_CHILD, initial_db=initial, final_db=final)
            for i in (1, 2)
        ]
        assert plain[0].result["server"] != plain[1].result["server"]
        honest = pool.run(MILK_VERIFIER, initial_db=initial, final_db=final, world="A")
        assert honest.label == "complete"


def test_a_worlds_verifier_key_names_its_whole_verifier_set():
    def scenario(name: str, code: str) -> SimpleNamespace:
        record = SimpleNamespace(code=code)
        return SimpleNamespace(name=name, verifiers={0: record}, sql_verifiers={})

    one, same, other = scenario("w", "a"), scenario("w", "a"), scenario("w", "b")
    assert verifier_world(one) == verifier_world(same)
    # a same-named world of another dataset (other verifier code) is another world
    assert verifier_world(one) != verifier_world(other)
    assert verifier_world(one).startswith("w:")
