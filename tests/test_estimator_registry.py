"""helpdp.estimators: the registry ``helpdp.ope`` dispatches on and the allow list of
``helpdp.select`` (docs/ope.md's coverage table): a new estimator is computable at once
and refused by ``select`` until it is on the allow list; the registry's dispatch gives
the numbers of the if/elif it replaced."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from helpdp import estimators as reg
from helpdp.demo import demo_dataset_path
from helpdp.ope import ESTIMATORS, estimate, load_logged
from helpdp.policies import AtTurns
from helpdp.select import SELECT_ESTIMATORS, SelectConfig, select

DOC = Path(__file__).resolve().parents[1] / "docs" / "ope.md"


@pytest.fixture(scope="module")
def logged():
    return load_logged(demo_dataset_path())


def _coverage_table() -> dict[str, str]:
    """docs/ope.md's coverage table: estimator -> its ``helpdp.select`` cell."""
    rows = re.findall(r"^\| `(\w+)` \| [\d.]+ \| [\d.]+ \| (\w+) \|$", DOC.read_text(), re.M)
    return dict(rows)


def test_the_allow_list_is_the_allowed_rows_of_the_coverage_table():
    table = _coverage_table()
    assert set(table) == set(ESTIMATORS)  # every shipped estimator has its row
    assert set(table.values()) == {"allowed", "refused"}
    allowed = {e for e, cell in table.items() if cell == "allowed"}
    assert set(reg.COVERAGE_CHECKED) == allowed == {"dr", "wdr"}
    assert set(SELECT_ESTIMATORS) == allowed
    for e in ESTIMATORS:  # the refused ones keep their one-line reason
        assert (reg.refusal(e) is None) == (e in allowed)
        assert e in allowed or reg.REGISTRY[e].refusal.endswith("; use wdr or dr")


def _twice_dr(tm, name, counts, g, task):
    return 2.0 * ((counts * tm.terms[name]["dr"]) @ g) / (counts @ g)


def test_a_new_estimator_is_computable_but_select_refuses_it_until_allowed(logged, monkeypatch):
    monkeypatch.delitem(reg.REGISTRY, "twice_dr", raising=False)  # removed again at the end
    rec = reg.register("twice_dr", _twice_dr, model_based=True)
    try:
        assert isinstance(rec, reg.Estimator) and rec.name == "twice_dr" and rec.model_based
        with pytest.raises(ValueError, match="already registered"):
            reg.register("twice_dr", _twice_dr)
        e = estimate(AtTurns([0]), logged, estimators=("dr", "twice_dr"), unit="episode", n_boot=10)
        assert e.get("twice_dr", "SR")[0] == pytest.approx(2 * e.get("dr", "SR")[0])

        cfg = SelectConfig(estimator="twice_dr", rungs=["no_such_rung"])
        with pytest.raises(ValueError) as err:
            select(demo_dataset_path(), cfg, 1.0, log=lambda *a: None)
        line = str(err.value)
        assert "\n" not in line and line.startswith("estimator: 'twice_dr': ")
        assert "COVERAGE_CHECKED (helpdp/estimators.py)" in line and "docs/ope.md" in line

        # on the allow list, the estimator check passes: the next check (rungs) refuses
        monkeypatch.setattr(reg, "COVERAGE_CHECKED", (*reg.COVERAGE_CHECKED, "twice_dr"))
        with pytest.raises(ValueError, match="rungs: unknown rung 'no_such_rung'"):
            select(demo_dataset_path(), cfg, 1.0, log=lambda *a: None)
    finally:
        reg.REGISTRY.pop("twice_dr", None)
    assert reg.refusal("twice_dr") == f"not one of {', '.join(ESTIMATORS)}"


# From a run of helpdp.ope.estimate before the registry (commit 3ce1076, the if/elif
# dispatch): the demo data, turns 0,3 against turn 0, unit="task": (value, lo, hi).
BEFORE = {
    "is": {
        "SR": (0.49366930385917523, 0.0, 0.9965965840417759),
        "U": (0.7742667122934994, 0.0, 1.7264032296383194),
        "dSR": (-0.39398772309487656, -1.0, 0.46223667532866725),
    },
    "snis": {
        "SR": (0.47619047619047655, 0.18661918062864907, 0.765761771752304),
        "U": (1.0714285714285714, 0.9171165245383721, 1.2257406183187707),
        "dSR": (-0.06505895538225975, -0.2068102420538751, 0.0766923312893556),
    },
    "pdis": {
        "SR": (0.49366930385917523, 0.0, 0.9965965840417759),
        "U": (1.35826414448351, 1.072328386990631, 1.6441999019763889),
        "dSR": (-0.39398772309487656, -1.0, 0.46223667532866725),
    },
    "dr": {
        "SR": (0.7902236094753822, 0.5940001438074123, 0.9864470751433521),
        "U": (1.703565808943092, 1.513847352503571, 1.8932842653826132),
        "dSR": (0.2241467609024362, -0.13873392721218977, 0.5870274490170622),
    },
    "wdr": {
        "SR": (0.7391592320737385, 0.5753517555224921, 0.9029667086249848),
        "U": (1.7308171940491814, 1.5561623329753083, 1.9054720551230546),
        "dSR": (0.0631384679196233, -0.11778247907667061, 0.2440594149159172),
    },
    "dm": {
        "SR": (0.7622905494525949, 0.6117252757854825, 0.9128558231197073),
        "U": (1.6549682066832707, 1.4244390934064162, 1.8854973199601253),
        "dSR": (0.01898336331332866, -0.17439354177711558, 0.21236026840377292),
    },
}


# The same, unit="episode" (n_boot=20, seed 0: the bootstrap replicates' counts): SR.
BEFORE_EPISODE = {
    "is": (0.49366930385917523, 0.2284313725490314, 0.8912862340744678),
    "snis": (0.47619047619047655, 0.42232142857142857, 0.6331649831649834),
    "pdis": (0.49366930385917523, 0.2284313725490314, 0.8912862340744678),
    "dr": (0.7902236094753828, 0.6903280842734757, 0.9446887205503139),
    "wdr": (0.7391592320737423, 0.7123951765276735, 0.7684525753575724),
    "dm": (0.7622905494526008, 0.7615026704413329, 0.7640380261229127),
}


def _table(e):
    return {(r.estimator, r.quantity): (r.value, r.lo, r.hi) for r in e.table.itertuples()}


def test_the_registry_gives_the_numbers_of_the_if_elif_it_replaced(logged):
    with pytest.warns(UserWarning, match="snis averages"):
        e = estimate(AtTurns([0, 3]), logged, unit="task", reference=AtTurns([0]))
    got = _table(e)
    assert set(e.table["estimator"]) == set(ESTIMATORS)
    for est, quantities in BEFORE.items():
        for q, want in quantities.items():
            np.testing.assert_allclose(got[(est, q)], want, rtol=1e-12, atol=1e-12)
    with pytest.warns(UserWarning, match="snis averages"):
        e = estimate(AtTurns([0, 3]), logged, unit="episode", n_boot=20, reference=AtTurns([0]))
    got = _table(e)
    for est, want in BEFORE_EPISODE.items():
        np.testing.assert_allclose(got[(est, "SR")], want, rtol=1e-12, atol=1e-12)
