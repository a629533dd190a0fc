"""helpdp.train without training: rewards on hand-made episodes, the splits, the
gate's caps, the rollout function on a scripted environment (masks, the agent design,
a dead worker), and import hygiene."""

from __future__ import annotations

import doctest
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import collect.awm.rewards
import helpdp.train.gate
from collect.awm.episode import ResetResult, StepResult
from collect.awm.protocol import parse_turn
from collect.awm.rewards import (
    FormatReward,
    GraduatedReward,
    GRPORewardConfig,
    VerifierReward,
    build_rewards,
)
from collect.rollout import Help
from helpdp.policies import Always, StateView
from helpdp.train.gate import Gate, SplitSchedule


@pytest.mark.parametrize("mod", [collect.awm.rewards, helpdp.train.gate])
def test_doctests(mod):
    res = doctest.testmod(mod)
    assert res.attempted > 0 and res.failed == 0


EPISODES = {  # hand-made episodes: (facts the rollout reports, graduated, verifier)
    "solo": (dict(outcome="complete", blind_calls=0, recovery_calls=0), 2.0, 1.0),
    "recovery": (dict(outcome="complete", blind_calls=0, recovery_calls=1), 1.3, 1.0),
    "blind+recovery": (dict(outcome="complete", blind_calls=1, recovery_calls=1), 1.3, 1.0),
    "blind": (dict(outcome="complete", blind_calls=2, recovery_calls=0), 0.8, 1.0),
    "incomplete": (dict(outcome="incomplete", blind_calls=1, recovery_calls=0), 0.1, 0.1),
    "others": (dict(outcome="others", blind_calls=0, recovery_calls=0), 0.1, 0.1),
    "format": (dict(outcome="format_error", blind_calls=0, recovery_calls=0), -1.0, -1.0),
    "dead worker": (dict(outcome="server_error", blind_calls=0, recovery_calls=0), None, None),
}


def _kwargs(rows):
    keys = rows[0].keys()
    return {k: [r[k] for r in rows] for k in keys}


def test_rewards_follow_the_hierarchy_on_hand_made_episodes():
    rows = [
        dict(e, valid=e["outcome"] not in ("server_error", "format_error"), end_reason="final")
        for e, _, _ in EPISODES.values()
    ]
    kw = _kwargs(rows)
    n = len(rows)
    assert GraduatedReward()([""] * n, [""] * n, **kw) == [g for _, g, _ in EPISODES.values()]
    assert VerifierReward()([""] * n, [""] * n, **kw) == [v for _, _, v in EPISODES.values()]
    custom = GraduatedReward(solo=3.0, recovery=2.0, blind=1.0, incomplete=0.0, format_error=-2.0)
    assert custom([""] * n, [""] * n, **kw)[:7] == [3.0, 2.0, 2.0, 1.0, 0.0, 0.0, -2.0]
    funcs, weights = build_rewards(GRPORewardConfig(format_weight=0.5))
    assert [f.__name__ for f in funcs] == ["graduated", "format"] and weights == [1.0, 0.5]
    import pickle

    assert pickle.loads(pickle.dumps(custom)) == custom
    assert FormatReward()([""], [""], format_errors=[1], turns=[4], outcome=["incomplete"]) == [
        0.75
    ]


def test_adaptive_split_thresholds_and_transitions():
    s = SplitSchedule(kind="adaptive", window=10)
    assert (s.phase, s.n_expert(8), s.n_expert(4)) == ("expert_heavy", 6, 3)
    s.observe([True] * 5 + [False] * 5)  # 50%: balanced
    assert (s.phase, s.n_expert(8)) == ("balanced", 4)
    s.observe([False] * 10)  # 0%
    assert (s.phase, s.n_expert(8)) == ("solo_heavy", 2)
    s.observe([True] * 8)  # 80% of the last 10
    assert (s.phase, s.n_expert(8)) == ("expert_heavy", 6)
    assert s.transitions == [
        (0, "expert_heavy", "balanced", 0.5),
        (1, "balanced", "solo_heavy", 0.0),
        (2, "solo_heavy", "expert_heavy", 0.8),
    ]
    assert SplitSchedule(kind="adaptive", high=0.9, low=0.6, initial_rate=0.7).phase == "balanced"
    assert SplitSchedule(kind="fixed", n_fixed=4).n_expert(8) == 4
    assert SplitSchedule(kind="budget").n_expert(8) == 8


def _view(e, t):
    return StateView(0, "w/0", t, "", episode_id=e)


def test_gate_caps_per_episode_and_batch_and_roles():
    g = Gate(Always(), {1: True, 2: True, 3: False}, max_per_episode=2, max_per_batch=3)
    got = [g.decide([_view(1, t), _view(2, t), _view(3, t)]).tolist() for t in range(3)]
    assert got == [[1, 1, 0], [1, 0, 0], [0, 0, 0]]  # batch cap 3 reached at turn 1
    assert g.calls == {1: 2, 2: 1}

    class Broken:
        name = "broken"

        def decide(self, views):
            raise OSError("endpoint down")

    g = Gate(Broken(), {1: True})
    with pytest.raises(RuntimeError, match="endpoint down"):
        g.decide([_view(1, 0)])
    assert g.errors and np.all(Gate(Broken(), {1: False}).decide([_view(1, 0)]) == 0)


# ---------------------------------------------------------------------------
# the rollout function on a scripted environment
# ---------------------------------------------------------------------------

ASK = '<tool_call>\n{"name": "ask_expert", "arguments": {"question": "how?"}}\n</tool_call>'
CALL = '<tool_call>\n{"name": "call_tool", "arguments": {"tool_name": "t", "arguments": "{}"}}\n</tool_call>'


class ScriptedEnv:
    """Turn 0: whatever the actor says is parsed; a call_tool or ask_expert continues,
    a final answer is verified complete."""

    def __init__(self, name):
        self.tools = [SimpleNamespace(name="t")]
        self.app = None
        self.name = name

    def reset(self, task_idx, episode_id=None):
        return ResetResult(episode_id or "", self.name, task_idx, f"task {self.name}", "SYSTEM")

    def step(self, text):
        a = parse_turn(text, expert_enabled=True)
        info = {"action": a.as_dict(), "failure": None, "format_error": False}
        if a.kind == "final":
            info.update(outcome="complete", valid=True, verification={"mode": "code"})
            return StepResult("", 1.0, True, info)
        return StepResult("OBSERVATION" if a.kind == "call_tool" else "", None, False, info)

    def close(self):
        pass


class ScriptedPool:
    def scenario(self, name):
        task = SimpleNamespace(text=f"task {name}")
        return SimpleNamespace(task=lambda i: task, solutions={})

    def acquire(self, name):
        if name == "dead":
            raise RuntimeError("worker died")
        return ScriptedEnv(name)

    def release(self, env):
        pass


class ScriptedBackend:
    """Episode turns by script: ask_expert, then a tool call, then a final answer."""

    def __init__(self, tok):
        self.tok = tok
        self.script = [ASK, CALL, "done"]
        self.calls = 0

    def generate(self, prompts, max_new, seed):
        out = []
        for p in prompts:
            turn = self.tok.decode(p).count("<|im_start|>assistant") - 1
            ids = self.tok(self.script[min(turn, 2)], add_special_tokens=False)["input_ids"]
            out.append((ids + [self.tok.eos_token_id], None))
        return out


class Expert:
    name, kind = "expert", "oracle"
    config = None

    def available(self, n):
        return True

    def help(self, view, env, rng):
        return Help("expert", "oracle", "EXPERT SAYS: call t", tokens=5)

    def close(self):
        pass


@pytest.fixture(scope="module")
def tok():
    pytest.importorskip("transformers")
    from helpdp.train.config import ModelConfig
    from helpdp.train.tiny import build_tiny

    _, tok = build_tiny(ModelConfig(), ["SYSTEM task a task dead", ASK, CALL, "EXPERT SAYS"])
    return tok


def _rollout(tok, design, policy=None):
    from helpdp.train.rollout import AWMRollout, GateRules, RolloutSettings, TokenActor

    lookup = {"task a": ("a", 0), "task dead": ("dead", 0)}
    return AWMRollout(
        ScriptedPool(),
        [Expert()],
        lookup,
        lambda tr: TokenActor(ScriptedBackend(tok), tok, max_turn_tokens=64),
        policy or Always(),
        SplitSchedule(kind="fixed", n_fixed=2, reference_group=4),
        rules=GateRules(design=design, max_per_episode=1),
        settings=RolloutSettings(num_generations=4),
    )


def _prompts(*texts):
    return [[{"role": "user", "content": t}] for t in texts]


def test_agent_design_answers_ask_expert_masks_feedback_and_marks_dead_workers(tok):
    r = _rollout(tok, "agent")
    out = r(_prompts(*["task a"] * 4, *["task dead"] * 4))
    assert out["role"] == ["expert", "expert", "solo", "solo"] * 2
    assert out["outcome"] == ["complete"] * 4 + ["server_error"] * 4  # only those episodes
    assert out["turns"] == [3] * 4 + [0] * 4
    # expert rollouts: the ask at turn 0 is answered at turn 1 (once: max_per_episode=1)
    assert out["expert_calls"] == [1, 1, 0, 0] + [0] * 4
    assert out["blind_calls"] == [1, 1, 0, 0] + [0] * 4
    # episodes run on threads: decisions are logged in the order they finish
    granted = sorted((d["episode_id"], d["t"]) for d in r.decisions if d["action"])
    assert granted == [(0, 1), (1, 1)]
    asked = sorted((d["episode_id"], d["t"]) for d in r.decisions if d["asked"])
    assert asked == [(e, 1) for e in range(4)]  # the gate is consulted only after an ask
    for i in range(4):
        ids, mask = out["completion_ids"][i], out["env_mask"][i]
        sampled = tok.decode([t for t, m in zip(ids, mask) if m])
        feedback = tok.decode([t for t, m in zip(ids, mask) if not m])
        assert sampled.count("<tool_call>") == 2 and sampled.endswith("done<|im_end|>")
        assert feedback.count("<tool_response>") == 2 and "OBSERVATION" in feedback
        assert ("EXPERT SAYS" in feedback) == (i < 2)
        assert ("not available" in feedback) == (i >= 2)  # solo: the ask is refused
        assert "EXPERT" not in sampled and "OBSERVATION" not in sampled
        # the sequence is exactly the chat template of the episode's messages
    funcs, _ = build_rewards(GRPORewardConfig())
    assert funcs[0](["p"] * 8, ["c"] * 8, **out) == [0.8, 0.8, 2.0, 2.0] + [None] * 4


def test_proactive_design_gates_every_turn_and_a_failing_gate_is_nohelp(tok):
    r = _rollout(tok, "proactive")
    out = r(_prompts(*["task a"] * 4))
    assert [d["t"] for d in r.decisions if d["action"]] == [0, 0]  # turn 0, cap 1 per episode
    assert len([d for d in r.decisions if d["asked"]]) == 12  # 4 episodes x 3 turns
    assert "EXPERT SAYS" in tok.decode(out["prompt_ids"][0])  # help before turn 0 is prompt

    class Broken:
        name = "broken"

        def decide(self, views):
            raise OSError("helper down")

    r = _rollout(tok, "proactive", Broken())
    out = r(_prompts(*["task a"] * 4))
    assert out["outcome"] == ["complete"] * 4 and sum(out["expert_calls"]) == 0
    errors = [d["gate_error"] for d in r.decisions if d["gate_error"]]
    assert len(errors) == 6 and "helper down" in errors[0]  # expert rollouts x 3 turns
    assert r.last_stats["gate/errors"] == 6


def test_importing_helpdp_train_imports_neither_torch_nor_trl():
    code = (
        "import sys, helpdp.train, helpdp.train.config, helpdp.train.gate, collect.awm.rewards\n"
        "import helpdp, helpdp.search\n"
        "assert 'torch' not in sys.modules and 'trl' not in sys.modules, 'heavy import'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
