"""bench/runtimes.py's comparisons of runtimes and the stage-2 sizing, on the shipped
real-actor data (no model, no server)."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REAL = str(ROOT / "helpdp" / "data" / "real-actor")


@pytest.fixture(scope="module")
def rt():
    spec = importlib.util.spec_from_file_location("bench_runtimes", ROOT / "bench" / "runtimes.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_runtimes"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_ipw_size_by_hand(rt):
    got = rt.ipw_size([1, 0, 1, 1], [0, 1, 2, 3], effect=0.1, power=0.8)
    # var = mean(2 y 2^k [k >= 1]) = (0 + 0 + 8 + 16) / 4; smooth = 2 * 0.75 * (2+4+8)/4
    assert got["var"] == pytest.approx(6.0) and got["var_smooth"] == pytest.approx(5.25)
    # (z_.975 + z_.8)^2 = 7.8489 -> 7.8489 * 6 / 0.01
    assert got["needed"] == 4709 and got["share_k>=1"] == 0.75


def test_a_dataset_against_itself_is_the_same_model(rt):
    table = rt.compare_runtimes({"a": [REAL], "b": [REAL]}, max_turns=6)
    last = table.splitlines()[-1]
    assert last == "| b | 243 | +0.000 [+0.000, +0.000] | +0.000 [+0.000, +0.000] | 1.00 | 1.00 |"
    t0 = rt.compare_turn0({"a": [REAL], "b": [REAL]}).splitlines()
    # 123 episodes with the expert's message at turn 0: 53 working calls of 123
    assert t0[2].startswith("| a | 123 | 0.431 | ")
    assert t0[3].startswith("| b | 123 | 0.431 (+0.000 [-0.110, +0.110]) | ")


def test_the_cap_cuts_success_and_turns(rt):
    full = rt.episodes_capped([REAL], 0)
    one = rt.episodes_capped([REAL], 1)
    assert (one["turns"] == 1).all() and len(one) == len(full) == 243
    # success within one turn: only episodes that succeeded in their single turn
    assert one["success"].sum() == ((full["success"] == 1) & (full["turns"] == 1)).sum()
    assert one["success"].sum() < full["success"].sum()
