"""Benchmark of the help-policy DP: load, solve, budget search, against baselines
measured in the same run.

    python bench/dp.py                 # 10^6 and 10^7 transitions
    python bench/dp.py --sizes 1e6     # quicker

For each size it builds an agent-like dataset (layered like episodes: 16 steps
deep, help observed at ~70% of states, early failures, state ids shuffled as
hashed history keys are), writes it as Parquet and reports:

* load: ``load_dataset`` (read, validate, compile, renumber breadth-first);
* solve: median seconds of one exact solve (V, S and M) at a fixed r;
* search: seconds for a full budget search (bracketing + chord steps);
* baseline: vectorized ``scipy.sparse`` value iteration (V only) to the same
  tolerance, and the ratio baseline / ours;
* bandwidth: bytes one solve reads from the model arrays per second, against the
  read bandwidth of a large numpy copy measured in the same run, and the ratio of
  the solve time to that bound;
* the unconstrained solvers a user might pick instead, if installed from PyPI
  (``mdpsolver``: C++/OpenMP value iteration; ``pymdptoolbox``), one solve at the
  same r with gamma = 0.99 (both need gamma < 1), next to ours at gamma = 0.99.
  They take every action at every state, so unobserved actions become copies of
  nohelp with a prohibitive cost, and terminal states absorbing self-loops.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numba  # noqa: E402

from helpdp import load_dataset, search_budget, solve  # noqa: E402
from helpdp.contract import build_manifest, write_dataset  # noqa: E402
from helpdp.solve import PARALLEL_MIN_LEVEL  # noqa: E402

R = 0.3  # fixed help cost for single solves
DEPTH = 16


def agent_like(n_transitions: int, seed: int = 0):
    """Layered DAG with ~n_transitions transitions; returns (manifest, states, transitions)."""
    rng = np.random.default_rng(seed)
    per_state = 3.05  # measured average transitions per non-terminal state of this generator
    n = int(n_transitions / per_state)
    width = n // (DEPTH + 1)
    n = width * (DEPTH + 1)
    layer = np.repeat(np.arange(DEPTH + 1), width)
    pos = np.tile(np.arange(width), DEPTH + 1)
    terminal = (layer == DEPTH) | (rng.random(n) < 0.02) & (layer > 2)
    success = terminal & (rng.random(n) < np.where(layer == DEPTH, 0.6, 0.0))
    src, act, dst = [], [], []
    inner = np.flatnonzero(~terminal)
    for a, n_succ, p_obs in [(0, 3, 1.0), (1, 2, 0.7)]:
        obs = inner[rng.random(inner.size) < p_obs]
        k = rng.integers(1, n_succ + 1, obs.size)
        s = np.repeat(obs, k)
        off = rng.integers(-8, 9, s.size)
        nxt = (layer[s] + 1) * width + (pos[s] + off) % width
        src.append(s)
        act.append(np.full(s.size, a, np.int8))
        dst.append(nxt)
    src, act, dst = np.concatenate(src), np.concatenate(act), np.concatenate(dst)
    key = np.unique((src * 2 + act) * n + dst)
    src, rem = np.divmod(key, 2 * n)
    act, dst = (rem // n).astype(np.int8), rem % n
    ids = rng.permutation(n).astype(np.int64) * 7919 + 13  # hashed-looking ids
    states = pd.DataFrame(
        {
            "state_id": ids,
            "task_id": pd.Series(["t"] * n, dtype="string"),
            "depth": layer.astype(np.int32),
            "is_start": layer == 0,
            "terminal": terminal,
            "success": success,
            "text": pd.Series([""] * n, dtype="string"),
        }
    )
    trans = pd.DataFrame(
        {
            "state_id": ids[src],
            "action": act,
            "next_state_id": ids[dst],
            "count": rng.integers(1, 6, src.size),
        }
    )
    trans = trans.sample(frac=1.0, random_state=seed, ignore_index=True)  # collection order
    manifest = build_manifest(["nohelp", "expert"], gamma=1.0, source={"generator": "bench/dp.py"})
    return manifest, states, trans


def write(path: Path, manifest, states, trans) -> None:
    """Write the dataset as the collector does (the contract's writer; not checked here:
    loading it is what the benchmark times)."""
    tables = {"states": states, "transitions": trans}
    write_dataset(path, manifest, tables, overwrite=True, check=False)


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def copy_read_bandwidth(nbytes: int = 400 * 2**20) -> float:
    """Bytes read per second by np.copyto of a large array (median of 5)."""
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    return a.nbytes / median_time(lambda: np.copyto(b, a), 5)


def scipy_vi(mdp, r: float, gamma: float, tol: float = 1e-10):
    """The baseline a user would write: vectorized sparse value iteration on V."""
    rows = np.repeat(np.arange(mdp.n_rows), np.diff(mdp.tr_ptr))
    P = sp.csr_matrix((mdp.tr_prob, (rows, mdp.tr_next)), shape=(mdp.n_rows, mdp.n_states))
    cost = np.where(mdp.sa_action > 0, r, 0.0)
    has = np.diff(mdp.sa_ptr) > 0
    starts = mdp.sa_ptr[:-1][has]
    term_v = np.where(mdp.success, 1.0, 0.0)

    def run():
        v = term_v.copy()
        for it in range(10_000):
            q = gamma * (P @ v) - cost
            new = term_v.copy()
            new[has] = np.maximum.reduceat(q, starts)
            if np.max(np.abs(new - v)) < tol:
                return new, it + 1
            v = new
        raise RuntimeError("no convergence")

    return run


def third_party_inputs(mdp, r: float):
    """Every action at every state; unobserved actions copy nohelp at cost 1e6."""
    n = mdp.n_states
    rows = np.repeat(np.arange(mdp.n_rows), np.diff(mdp.tr_ptr))
    row_state = np.repeat(np.arange(n), np.diff(mdp.sa_ptr))
    mats, rewards = [], np.zeros((n, 2))
    succ = mdp.success.astype(float)
    for a in (0, 1):
        sel = mdp.sa_action == a
        row_of_state = np.full(n, -1)
        row_of_state[row_state[sel]] = np.flatnonzero(sel)
        fallback = np.full(n, -1)
        fallback[row_state[mdp.sa_action == 0]] = np.flatnonzero(mdp.sa_action == 0)
        use = np.where(row_of_state >= 0, row_of_state, fallback)
        i, j, p = [], [], []
        mask = np.isin(rows, use[use >= 0])
        src_state = row_state[rows[mask]]
        i.append(src_state)
        j.append(mdp.tr_next[mask])
        p.append(mdp.tr_prob[mask])
        absorbing = np.flatnonzero(use < 0)
        i.append(absorbing)
        j.append(absorbing)
        p.append(np.ones(absorbing.size))
        M = sp.csr_matrix((np.concatenate(p), (np.concatenate(i), np.concatenate(j))), shape=(n, n))
        mats.append(M)
        imm = M @ np.where(mdp.terminal, succ, 0.0)
        imm[absorbing] = 0.0
        cost = (r if a else 0.0) + np.where((row_of_state < 0) & (use >= 0), 1e6, 0.0)
        rewards[:, a] = imm - np.where(use >= 0, cost, 0.0)
    return mats, rewards


def bench_third_party(mdp, r: float, gamma: float, report, ours1: float):
    mats, rewards = third_party_inputs(mdp, r)
    try:
        import mdptoolbox.mdp

        # its input check densifies sparse matrices (S x S floats): skip it, the
        # matrices are stochastic by construction
        mdptoolbox.mdp._util.check = lambda P, R: None
        # gamma = 1: with gamma < 1 its constructor bounds the iteration count with
        # a Python loop over states (minutes at 10^6); our DAG converges without it
        t = time.perf_counter()
        vi = mdptoolbox.mdp.ValueIteration(mats, rewards, 1.0, epsilon=1e-6, max_iter=10_000)
        vi.run()
        report("pymdptoolbox ValueIteration (gamma 1)", time.perf_counter() - t, base=ours1)
    except ImportError:
        report("pymdptoolbox", None, "not installed (pip install pymdptoolbox)")
    try:
        import mdpsolver

        elem = []
        for a, M in enumerate(mats):
            coo = M.tocoo()
            elem.append(np.c_[coo.row, np.full(coo.nnz, a), coo.col, coo.data])
        tran = np.concatenate(elem).tolist()
        for e in tran:
            e[0], e[1], e[2] = int(e[0]), int(e[1]), int(e[2])
        rew = [[int(s), a, float(rewards[s, a])] for s in range(mdp.n_states) for a in (0, 1)]
        m = mdpsolver.model()
        m.mdp(discount=gamma, rewardsElementwise=rew, tranMatElementwise=tran)
        t = time.perf_counter()
        m.solve(algorithm="vi", tolerance=1e-6, update="standard", parallel=True)
        report("mdpsolver value iteration, OpenMP (gamma 0.99)", time.perf_counter() - t)
    except ImportError:
        report("mdpsolver", None, "not installed (pip install mdpsolver)")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="1e6,1e7", help="transition counts, comma separated")
    ap.add_argument(
        "--third-party-max",
        type=float,
        default=1e6,
        help="largest size to run third-party solvers on",
    )
    args = ap.parse_args()
    bw = copy_read_bandwidth()
    print(f"numpy copy read bandwidth: {bw / 1e9:.2f} GB/s")
    solve(load_dataset_small(), R, gamma=1.0)  # compile (or load the numba cache) first
    rows = []
    for size in [int(float(s)) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"\n== {size:.0e} transitions ==")
            t = time.perf_counter()
            frames = agent_like(size)
            write(Path(tmp), *frames)
            del frames
            print(f"built and wrote dataset in {time.perf_counter() - t:.1f}s")
            t = time.perf_counter()
            ds = load_dataset(tmp)
            t_load = time.perf_counter() - t
        mdp = ds.mdp
        print(f"{mdp.n_states} states, {mdp.n_rows} state-actions, {mdp.n_transitions} transitions")
        t_serial = median_time(lambda mdp=mdp: solve(mdp, R, gamma=1.0, parallel=False), 7)
        t_solve = median_time(lambda mdp=mdp: solve(mdp, R, gamma=1.0), 7)
        u0 = solve(mdp, 0.0, gamma=1.0).total_usage
        u1 = solve(mdp, 1e9, gamma=1.0).total_usage
        budget = u1 + 0.4 * (u0 - u1)
        t = time.perf_counter()
        res = search_budget(mdp, budget, gamma=1.0)
        t_search = time.perf_counter() - t
        base = scipy_vi(mdp, R, 1.0)
        v_ref, iters = base()
        t_base = median_time(base, 3)
        ours = solve(mdp, R, gamma=1.0)
        assert np.allclose(ours.values[:, 0], v_ref, atol=1e-9), "baseline disagrees"
        touched = mdp.nbytes + 2 * ours.values.nbytes + ours.action.nbytes
        bound = touched / bw
        print(f"load            {t_load:8.3f} s")
        levels = len(mdp.block_ptr) - 1
        print(f"solve (serial)  {t_serial * 1e3:8.1f} ms   (V, S, M; one reverse-topological pass)")
        print(
            f"solve (default) {t_solve * 1e3:8.1f} ms   ({numba.get_num_threads()} threads when levels average >= "
            f"{PARALLEL_MIN_LEVEL} states; here {mdp.n_states / levels:.0f} over {levels} levels)"
        )
        print(
            f"budget search   {t_search:8.3f} s    ({res.solves} solves, budget {budget:.3f}, E[S] {res.expected_success:.4f})"
        )
        print(
            f"scipy VI        {t_base * 1e3:8.1f} ms   ({iters} sweeps, V only)  ->  ours is {t_base / t_solve:5.1f}x faster"
        )
        print(f"bandwidth       {touched / t_solve / 1e9:8.2f} GB/s read+written by a solve; bound {bound * 1e3:.1f} ms "
              f"-> solve is {t_solve / bound:4.2f}x the bandwidth bound")  # fmt: skip
        if size <= args.third_party_max:
            ours99 = median_time(lambda mdp=mdp: solve(mdp, R, gamma=0.99), 5)
            print(f"ours (gamma 0.99)           {ours99 * 1e3:8.1f} ms")

            def report(name, secs, note="", base=ours99):
                if secs is None:
                    print(f"{name:<46} {note}")
                else:
                    print(f"{name:<46} {secs * 1e3:8.1f} ms  -> ours is {secs / base:6.1f}x faster")

            bench_third_party(mdp, R, 0.99, report, t_solve)
        rows.append((size, t_load, t_solve, t_search, t_base / t_solve, t_solve / bound))
    print("\nsummary: size, load s, solve ms, search s, x faster than scipy, x bandwidth bound")
    for size, tl, ts, tsr, sp_ratio, bw_ratio in rows:
        print(
            f"{size:.0e}  {tl:7.2f}  {ts * 1e3:8.1f}  {tsr:7.3f}  {sp_ratio:7.1f}  {bw_ratio:6.2f}"
        )


def load_dataset_small():
    from helpdp import demo_dataset_path

    return load_dataset(demo_dataset_path()).mdp


if __name__ == "__main__":
    tqdm.monitor_interval = 0
    main()
