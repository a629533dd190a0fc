"""The per-task layout and pass: components, renumbering, the chunked pass with
dynamic scheduling, the choice between passes."""

import numpy as np
import pytest
from pertask_helpers import random_tasks

from helpdp import from_frames, solve
from helpdp._src import kernels, pertask
from helpdp._src.bundles import Backup, Chunks, Csr, Values
from helpdp.solve import _plan, choose_path, eligible_paths


def _edges(m):
    rows = np.repeat(np.arange(m.n_states), np.diff(m.sa_ptr))
    return np.repeat(rows, np.diff(m.tr_ptr)), m.tr_next.astype(np.int64)


@pytest.mark.parametrize("seed", range(4))
def test_layout_is_task_contiguous_and_topological(seed):
    frames = random_tasks(seed, n_tasks=6)
    ds = from_frames(*frames)
    m = ds.mdp
    src, dst = _edges(m)
    comp = np.repeat(np.arange(len(m.comp_ptr) - 1), np.diff(m.comp_ptr))
    assert np.array_equal(comp[src], comp[dst])  # no transition leaves its range
    assert np.all(dst > src)  # topological inside each range
    # every component is exactly one task here (each random_dag is connected)
    task = ds.states.set_index("state_id").loc[ds.state_ids, "task_id"].to_numpy()
    assert len(m.comp_ptr) - 1 == 6
    for c in range(6):
        assert len(set(task[m.comp_ptr[c] : m.comp_ptr[c + 1]])) == 1
    # the level order still delimits levels (the level-parallel pass)
    level = np.empty(m.n_states, np.int64)
    for b in range(len(m.block_ptr) - 1):
        level[m.order[m.block_ptr[b] : m.block_ptr[b + 1]]] = b
    assert np.all(level[dst] < level[src])


@pytest.mark.parametrize("py", [False, True], ids=["jit", "py_func"])
def test_components_counting_order_renumber(py):
    m = from_frames(*random_tasks(7, n_tasks=4)).mdp
    f = (lambda k: getattr(pertask, k).py_func) if py else (lambda k: getattr(pertask, k))
    label, n_comp = f("components")(m.n_states, m.sa_ptr, m.tr_ptr, m.tr_next.astype(np.int64))
    assert n_comp == 4
    assert np.array_equal(label, np.repeat(np.arange(4), np.diff(m.comp_ptr)))
    keys = np.array([2, 0, 1, 0, 2, 1], np.int64)
    assert f("counting_order")(keys, 3, np.arange(6)).tolist() == [1, 3, 2, 5, 0, 4]
    # renumbering by the identity keeps every array
    n = m.n_states
    old = Csr(m.sa_ptr, m.sa_action, m.sa_count, m.tr_ptr, m.tr_next, m.tr_prob)

    def renumber(inv):
        new = pertask.empty_csr(n, m.n_rows, m.n_transitions, np.int8, np.int64)
        new_of_old = np.empty(n, np.int64)
        f("renumber_into")(inv, old, new, new_of_old)
        return new, new_of_old

    inv = np.arange(n, dtype=np.int64)
    for a, b in zip(renumber(inv)[0], old):
        assert np.array_equal(a, b)
    # reversing the numbering maps each edge s -> t to n-1-s -> n-1-t
    (sa, _, _, tp, nx, _), new_of_old = renumber(inv[::-1].copy())
    assert np.array_equal(new_of_old, n - 1 - inv)
    src, dst = _edges(m)
    rows = np.repeat(np.arange(n), np.diff(sa))
    src2 = np.repeat(rows, np.diff(tp))
    assert sorted(zip(src2.tolist(), nx.tolist())) == sorted(
        zip((n - 1 - src).tolist(), (n - 1 - dst).tolist())
    )


def test_chunk_plan_groups_whole_tasks_largest_first():
    comp_ptr = np.array([0, 3, 5, 20, 21, 30])
    lo, hi, sched = pertask.chunk_plan(comp_ptr, 5)
    assert lo.tolist() == [0, 5, 20] and hi.tolist() == [5, 20, 30]
    assert sched.tolist() == [1, 2, 0]
    assert pertask.chunk_starts.py_func(comp_ptr, 5).tolist() == [0, 2, 3]


@pytest.mark.parametrize("py", [False, True], ids=["jit", "py_func"])
@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_chunked_pass_equals_serial_pass(py, gamma):
    m = from_frames(*random_tasks(11, n_tasks=9, gamma=gamma)).mdp
    outs = []
    rev = np.arange(m.n_states - 1, -1, -1)
    chunks = Chunks(*pertask.chunk_plan(m.comp_ptr, 7))
    assert len(chunks.sched) >= 3
    fn = pertask.backward_chunks.py_func if py else pertask.backward_chunks
    for run in (
        lambda *a: kernels.backward_pass(rev, *a),
        lambda *a: kernels.backward_pass(np.zeros(0, np.int64), *a),  # n - 1, ..., 0
        lambda *a: kernels.backward_pass(m.order, *a),
        lambda *a: fn(2, chunks, *a),
    ):
        val = np.zeros((m.n_states, 3))
        act = np.full(m.n_states, -1, np.int8)
        backup = Backup(np.zeros(0), np.array([0.0, 0.07]), gamma, 0, 1e-12, 1e-9)
        run(m.graph, backup, Values(val, act))
        outs.append((val, act))
    for val, act in outs[1:]:
        assert np.array_equal(val, outs[0][0]) and np.array_equal(act, outs[0][1])
    assert (outs[0][1] == 1).any() and (outs[0][1] == 0).any()  # the data makes it bite


def test_every_pass_gives_the_same_solution():
    m = from_frames(*random_tasks(3, n_tasks=12)).mdp
    ref = solve(m, 0.1, gamma=1.0, parallel="serial")
    for p in ("tasks", "levels", "auto", True, False):
        sol = solve(m, 0.1, gamma=1.0, parallel=p)
        assert np.array_equal(sol.values, ref.values) and np.array_equal(sol.action, ref.action)
    with pytest.raises(ValueError, match="parallel must be"):
        solve(m, 0.1, gamma=1.0, parallel="fast")


def test_fetch_add_returns_the_old_value():
    a = np.array([5, 7], np.int64)
    assert pertask.fetch_add(a, 1, 3) == 7 and a.tolist() == [5, 10]


def test_choose_path_takes_the_faster_and_retimes(monkeypatch):
    import sys

    import numba

    m = from_frames(*random_tasks(5, n_tasks=20)).mdp
    monkeypatch.setattr(sys.modules["helpdp.solve"], "TASK_CHUNK", 4)
    m.cache.clear()
    if numba.get_num_threads() < 2:
        assert eligible_paths(m) == ["serial"]
        return
    paths = eligible_paths(m)
    assert paths[:2] == ["serial", "tasks"] and len(_plan(m)["chunks"].sched) >= 2
    from helpdp.solve import RETIME_EVERY, _record

    seen = [choose_path(m, paths) for _ in range(2)]
    assert seen == ["serial", "serial"]  # untimed paths are timed first, in order
    _record(m, "serial", 1.0)
    assert choose_path(m, paths) == "tasks"
    _record(m, "tasks", 3.0)  # the threaded pass loses (a busy machine)
    picks = []
    for _ in range(RETIME_EVERY - 1):
        picks.append(choose_path(m, paths))
        _record(m, picks[-1], 1.0 if picks[-1] == "serial" else 3.0)
    assert picks == ["serial"] * (RETIME_EVERY - 1)
    # ... until it has not run for RETIME_EVERY solves: it is timed again
    assert choose_path(m, paths) == "tasks"
    _record(m, "tasks", 3.0)  # still losing: the next re-check waits twice as long
    picks = []
    for _ in range(2 * RETIME_EVERY - 1):
        picks.append(choose_path(m, paths))
        _record(m, picks[-1], 1.0 if picks[-1] == "serial" else 3.0)
    assert picks == ["serial"] * (2 * RETIME_EVERY - 1)
    assert choose_path(m, paths) == "tasks"
    _record(m, "tasks", 0.5)  # the machine is free again: the threaded pass wins
    assert choose_path(m, paths) == "tasks"


def test_times_measured_quiet_never_decide_a_busy_solve(monkeypatch):
    """The threaded pass won when both CPUs were free; a solve that starts with none
    free is decided by the times measured with none free (the serial pass), and the
    quiet choice stands when the machine is free again."""
    m = from_frames(*random_tasks(5, n_tasks=20)).mdp
    paths = ["serial", "tasks"]
    from helpdp.solve import RETIME_EVERY, _record

    for ctx, serial, tasks in ((2, 1.0, 0.6), (1, 1.0, 1.6)):
        for p, secs in (("serial", serial), ("tasks", tasks)):
            assert choose_path(m, paths, ctx) == p  # each context times each pass
            _record(m, p, secs, ctx)
    assert choose_path(m, paths, 1) == "serial"
    assert choose_path(m, paths, 2) == "tasks"
    assert choose_path(m, paths, None) == "serial"  # a context not seen yet: timed afresh
    # no CPU free: serial, whatever was timed (never a thread that waits for a CPU)
    for _ in range(3 * RETIME_EVERY):
        assert choose_path(m, paths, 0) == "serial"


def test_free_cpus_reads_the_instantaneous_runnable_count(monkeypatch, tmp_path):
    import sys

    solve_mod = sys.modules["helpdp.solve"]

    f = tmp_path / "loadavg"
    monkeypatch.setattr(solve_mod, "LOADAVG", str(f))
    monkeypatch.setattr(solve_mod.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(solve_mod.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    # "running/total": this thread (1) + n others; 4 CPUs machine-wide, 2 of them ours
    for running, threads, free in (
        (1, 2, 2),
        (3, 2, 2),
        (4, 2, 1),
        (5, 2, 0),
        (9, 2, 0),
        (2, 1, 1),
    ):
        f.write_text(f"7.50 6.00 5.00 {running}/300 12345\n")
        assert solve_mod.free_cpus(threads) == free, (running, threads)
    f.write_text("garbage\n")
    assert solve_mod.free_cpus(2) is None
    monkeypatch.setattr(solve_mod, "LOADAVG", str(tmp_path / "absent"))
    assert solve_mod.free_cpus(2) is None


@pytest.mark.parametrize("path", ["serial", "tasks", "levels"])
def test_a_solve_reuses_only_arrays_nothing_holds(path):
    """A solve writes into the previous solve's arrays once nothing holds them (the
    same numbers as into new ones, whatever they held), and never into arrays a
    Solution or a view of its arrays still holds."""
    m = from_frames(*random_tasks(5, n_tasks=12)).mdp
    ref = solve(m, 0.1, gamma=1.0, parallel=path)
    ref_vals, ref_act = ref.values.copy(), ref.action.copy()
    other = solve(m, 0.3, gamma=1.0, parallel=path)  # ref is held: new arrays
    assert other.values is not ref.values and other.action is not ref.action
    assert np.array_equal(ref.values, ref_vals) and np.array_equal(ref.action, ref_act)
    other_id = id(other.values)
    other.values[:] = np.nan  # what a reused array held must not matter
    other.action[:] = 7
    del other
    again = solve(m, 0.1, gamma=1.0, parallel=path)
    assert id(again.values) == other_id  # reused
    assert np.array_equal(again.values, ref_vals) and np.array_equal(again.action, ref_act)
    view = again.values[:, 1]  # a view holds the array
    del again
    third = solve(m, 0.3, gamma=1.0, parallel=path)
    assert id(third.values) != other_id
    assert np.array_equal(view, ref_vals[:, 1])
