"""bench/safe_select.py at small size: the whole protocol on a random HelpWorld, its
choice valued exactly against the rules' hull at its own spend."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import safe_select  # noqa: E402
from helpdp.policies import AtTurns, Never  # noqa: E402
from helpdp.synthetic import HelpWorld  # noqa: E402


def test_hull_value_is_the_rules_upper_hull():
    w = HelpWorld()
    s_never, _ = w.exact(Never())
    s0, u0 = w.exact(AtTurns((0,)))
    assert np.isclose(safe_select.hull_value(w, 0.0), s_never)
    mid = safe_select.hull_value(w, u0 / 2)
    assert mid >= (s_never + s0) / 2 - 1e-12  # at least the chord to turn 0


def test_one_world_runs_the_protocol():
    rows = safe_select.one_world(0, 8, True, (2.0,))
    (r,) = rows
    assert r["tasks"] == 8 and np.isfinite(r["gap"]) and 0 <= r["SR"] <= 1
    table = safe_select.summarize(rows)
    assert table[0]["worlds"] == 1 and table[0]["worse_rate"] in (0.0, 1.0)


def test_the_shipped_meta_evaluation_recomputes_the_docs_table():
    # docs/ope.md's table is summarize() of the shipped rows: plain worlds 1 of 120 choices
    # worse than the rules' hull by more than 0.01, rescue worlds 69 of 120
    path = (
        Path(__file__).resolve().parents[1]
        / "docs/results/tables/safe-select-fallback-reference.jsonl"
    )
    table = safe_select.summarize(safe_select.read_rows(path))
    assert len(table) == 16 and all(t["worlds"] == 15 for t in table)
    worse = {k: sum(t["worse"] for t in table if t["kind"] == k) for k in ("plain", "rescue")}
    assert worse == {"plain": 1, "rescue": 69}
    best = max(table, key=lambda t: t["better_rate"])
    assert (best["kind"], best["tasks"], best["design"], best["budget"], best["better"]) == (
        "rescue", 16, "grid + stage 2", 1.05, 3,
    )  # fmt: skip


def test_the_shipped_rules_hull_rows_recompute_the_comparison():
    # docs/ope.md: fallback=rules_hull loses nowhere at budget 2 and 17 + 27 of 120 at 1.05
    path = (
        Path(__file__).resolve().parents[1]
        / "docs/results/tables/safe-select-fallback-rules_hull.jsonl"
    )
    table = safe_select.summarize(safe_select.read_rows(path))
    worse = {(t["kind"], t["budget"]): 0 for t in table}
    for t in table:
        worse[(t["kind"], t["budget"])] += t["worse"]
    assert worse == {
        ("plain", 1.05): 17,
        ("plain", 2.0): 0,
        ("rescue", 1.05): 27,
        ("rescue", 2.0): 0,
    }
