"""The one registry of policy kinds (helpdp.policy_registry, #50): a new kind is one class
and one registration, and build_policy, policy_spec, the error's list of names and the
evaluation's families all follow it; every registered kind round-trips its specs."""

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from helpdp.evaluate.stats import compare, is_rule
from helpdp.policies import (
    AtTurns,
    Never,
    RandomStates,
    TablePolicy,
    TriggerRandomised,
    TurnZero,
    build_policy,
    name_family,
    policy_family,
    policy_spec,
)
from helpdp.policy_registry import kinds, register, unregister


@dataclass(frozen=True)
class EveryK:
    """The toy kind: help at every k-th turn."""

    k: int
    action: int = 1
    name: str = ""

    def __post_init__(self):
        if not self.name:
            object.__setattr__(self, "name", f"toy every {self.k}")

    def decide(self, views):
        return np.asarray([self.action if v.depth % self.k == 0 else 0 for v in views], np.int8)


@pytest.fixture
def toy_kind():
    """``every:K`` and ``{"kind": "every", "k": K}`` registered, in one place, for one test."""
    register(
        family="rule",
        forms="every:K",
        parse=lambda s, seed, action: (
            EveryK(int(s.partition(":")[2]), action) if s.startswith("every:") else None
        ),
        kind="every",
        from_dict=lambda d, seed, action, load_json: EveryK(int(d["k"]), action),
        spec=lambda p: f"every:{p.k}",
        display="toy every ",
    )(EveryK)
    yield EveryK
    unregister(EveryK)


def test_a_new_kind_is_one_registration(toy_kind):
    pol = build_policy("every:3", action=2)
    assert pol == EveryK(3, 2) and pol.name == "toy every 3"
    assert build_policy({"kind": "every", "k": 3}, action=2) == pol
    assert policy_spec(pol) == "every:3"  # built by name: the name it was built from
    assert policy_spec(EveryK(4)) == "every:4"  # built directly: what its kind prints
    assert build_policy(policy_spec(EveryK(4))) == EveryK(4)
    with pytest.raises(ValueError, match=r"random_episodes:P, every:K\), a python"):
        build_policy("no such policy")
    with pytest.raises(ValueError, match="random, triggers or every"):
        build_policy({"kind": "nope"})
    # the evaluation classifies it: by the policy (harness) and by its name (stats, plots)
    assert policy_family(pol) == "rule" and name_family(pol.name) == "rule"
    assert is_rule(pol.name)
    pairs = [f"t{i}#0" for i in range(8)]
    r = pd.DataFrame(
        [
            {"policy": n, "split": "test", "pair": p, "expert_calls": c, "success": s}
            for n, c, s in [("never", 0, 0), ("toy every 3", 1, 1), ("smart", 0.5, 1)]
            for p in pairs
        ]
    )
    assert (
        compare(r, "smart", "test", [])["rules_equal_spend"]
        == "never / toy every 3 mixed 0.50/0.50"
    )


def test_unregistered_kind_is_gone(toy_kind):
    unregister(toy_kind)
    assert all(k.cls is not EveryK for k in kinds())
    assert policy_family(EveryK(2)) is None and name_family("toy every 2") is None
    with pytest.raises(ValueError, match=r"random_episodes:P\), a python"):
        build_policy("every:2")
    assert policy_spec(EveryK(2)) is None


def test_register_refuses_a_second_registration_and_an_unknown_family():
    with pytest.raises(ValueError, match="registered already"):
        register(family="rule")(TurnZero)
    with pytest.raises(ValueError, match="registered already"):
        register(family="rule", kind="rule", from_dict=lambda *a: None)(EveryK)
    with pytest.raises(ValueError, match="family"):
        register(family="nope")


SPECS = [
    "never",
    "always",
    "turn0",
    "turns:0,2",
    "after:failure",
    "turn0+after:failure",
    "turn0+after:repeat+max:2",
    "after:failed,loop",
    "random:0.3",
    "random_episodes:0.25",
]


@pytest.mark.parametrize("spec", SPECS)
def test_every_spec_round_trips(spec):
    pol = build_policy(spec, seed=3)
    assert policy_spec(pol) == spec
    fresh = type(pol)(**{k: v for k, v in vars(pol).items() if k != "spec_name"})
    assert not hasattr(fresh, "spec_name") and policy_spec(fresh) == spec  # the printer's
    again = build_policy(policy_spec(fresh), seed=3)
    assert again == pol and again.name == pol.name


def test_every_kind_with_a_form_parses_one_of_the_specs():
    printed = {type(build_policy(s)) for s in SPECS}
    assert {k.cls for k in kinds() if k.parse is not None} <= printed


def test_aliases_and_dicts_keep_their_policies():
    assert build_policy("turn_zero") == TurnZero()
    assert policy_spec(build_policy("after_failure")) == "after_failure"
    assert build_policy({"kind": "rule", "turns": [3, 0]}) == AtTurns((0, 3))
    assert build_policy({"kind": "random", "p": 0.3, "seed": 4}) == RandomStates(0.3, seed=4)
    design = build_policy({"kind": "triggers", "base": "turn0", "events": ["repeat"], "q": 0.5})
    assert policy_spec(design) == {
        "kind": "triggers",
        "base": "turn0",
        "events": ["repeat"],
        "q": 0.5,
        "seed": 0,
    }
    assert policy_family(design) == "candidate"


def test_families_of_the_registered_kinds():
    fam = {s: policy_family(build_policy(s)) for s in SPECS}
    assert fam["never"] == fam["always"] == "baseline"
    assert fam["random:0.3"] == "random" and fam["random_episodes:0.25"] == "candidate"
    assert {fam[s] for s in SPECS[2:8]} == {"rule"}
    for s in SPECS:  # the name a results table carries classifies as the policy does
        assert name_family(build_policy(s).name) == fam[s]
    assert policy_family(TablePolicy({}, name="never")) is None
    assert name_family("dp table (budget 1)") is None
    # a stage-2 design's name begins with its base's: read by name, as it always was
    assert is_rule(TriggerRandomised(TurnZero(), ["repeat"], 0.5).name)
    assert not is_rule(TriggerRandomised(Never(), ["repeat"], 0.5).name)
