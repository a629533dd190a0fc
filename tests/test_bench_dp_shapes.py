"""bench/dp.py's datasets: the ``short`` shape is AWM-1K's (many short tasks, about one
transition per state, at most 12 steps), and the solver's passes agree on it."""

import importlib.util
import sys
from pathlib import Path

import numba  # noqa: F401 - bench/dp.py imports it (the fast lane reads this file's imports)
import numpy as np
import pytest
import scipy  # noqa: F401 - bench/dp_peers.py imports it
import tqdm  # noqa: F401 - bench/dp.py imports it

from helpdp import solve
from helpdp.data import from_frames

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location("bench_dp", ROOT / "bench" / "dp.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return mod


def test_short_shape_is_many_short_tasks_with_one_transition_per_state(bench):
    man, states, trans = bench.SHAPES["short"](70_000)
    tasks = states["task_id"].nunique()
    assert 1_800 <= tasks <= 2_200  # 7 episodes of ~5 transitions a task
    assert 0.9 <= len(trans) / len(states) <= 1.0
    per_task = states.groupby("task_id").size()
    assert per_task.max() <= 7 * 12 + 1  # 7 episodes of at most 12 steps, one root
    # the default tree: few large tasks (120 episodes of up to 16 steps)
    _, st_tree, _ = bench.SHAPES["tree"](70_000)
    assert st_tree["task_id"].nunique() == 72 and st_tree.groupby("task_id").size().max() > 500


def test_the_passes_agree_on_the_short_shape(bench):
    man, states, trans = bench.SHAPES["short"](20_000)
    mdp = from_frames(man, states, trans).mdp
    sol = {p: solve(mdp, 0.3, gamma=1.0, parallel=p) for p in ("serial", "tasks")}
    assert np.array_equal(sol["serial"].values, sol["tasks"].values)
    assert np.array_equal(sol["serial"].action, sol["tasks"].action)
    assert 0 < sol["serial"].expected_success < 1
