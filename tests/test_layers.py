"""The package layers: what each layer may import (checked in a fresh interpreter)."""

import json
import subprocess
import sys

import pytest

COLLECTION_SIDE = (
    "collect.actors",
    "collect.collector",
    "collect.executors",
    "collect.interventions",
    "collect.policy",
    "collect.rollout",
    "collect.schedule",
    "collect.shards",
    "collect.statekey",
    "collect.types",
)


def _modules_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize(
    "statement",
    [
        "import collect.awm",
        "import collect.awm.env, collect.awm.serve, collect.awm.check, collect.awm.llm",
    ],
)
def test_the_awm_runtime_never_imports_the_collector(statement):
    loaded = _modules_after(statement)
    assert "collect.awm.env" in loaded or statement == "import collect.awm"
    assert not loaded & set(COLLECTION_SIDE), sorted(loaded & set(COLLECTION_SIDE))


def test_the_dp_core_imports_neither_collect_nor_torch():
    loaded = _modules_after("import helpdp, helpdp.search, helpdp.budget, helpdp.contract")
    heavy = {m for m in loaded if m.split(".")[0] in ("collect", "prm", "torch", "trl")}
    assert not heavy, sorted(heavy)


def test_the_collector_imports_no_layer_above_it():
    """collect uses helpdp's contract, DP and policies, never the layers built on it."""
    loaded = _modules_after("import collect.collector")
    above = ("helpdp.train", "helpdp.helper", "helpdp.evaluate", "helpdp.label", "prm")
    bad = {m for m in loaded if m.startswith(above)}
    assert "helpdp.contract" in loaded and not bad, sorted(bad)
