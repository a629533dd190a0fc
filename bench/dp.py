"""Benchmark of the help-policy DP: load, solve, budget search, frontier, against
baselines measured in the same run, quiet and under load.

    python bench/dp.py                         # 2.2 * 10^6 and 10^7 transitions
    python bench/dp.py --sizes 1e6             # quicker
    python bench/dp.py --shape layered         # one huge task (the level-parallel case)
    python bench/dp.py --shape short --sizes 2.2e6   # many short tasks (AWM-1K's shape)
    python bench/dp.py --stream 1e8 --dir /tmp/helpdp-stream --memory-cap 3G
                                               # >= 10^8 transitions streamed from disk
    python bench/dp.py --sizes 1e7 --sections frontier --keep-data --dir /tmp
                                               # load and the budget sweeps only; the
                                               # dataset is kept and reused next time

Datasets (``--shape``): ``tree`` (default) is history-keyed like the agents'
held-out data: per task, 120 episodes of up to 16 steps, each state the history
that led to it, so every task is a tree and tasks never connect; help is
triggered at random per episode (p in 0..1, as the collector's schedule), errors
are likelier without help, three errors fail the episode. ``layered`` is one big
task (a 16-level DAG, paths merging), the case of the level-parallel pass. ``short`` is
AWM-1K's shape: many short tasks (7 episodes of up to 12 steps, 1-8 progress steps to
succeed; at 2.2 * 10^6 transitions 63,000 tasks, about one transition per state). State
ids are shuffled hashes, the transitions file is in collection order.

For each size it reports, each row quiet and then under load (two busy-loop
processes the benchmark starts itself, so both are in one run), with the load
average at the time:

* solve: median seconds of one exact solve (V, S and M) at a fixed r by each
  pass -- ``serial``, ``tasks`` (per-task, tasks handed to threads on demand),
  ``levels`` (level-synchronous), ``auto`` (the default: the fastest measured) --
  and, at every numba thread count, the per-task pass and ``auto`` (the issue's
  target: no thread count makes the default slower than serial by more than 10%);
* scipy: vectorized ``scipy.sparse`` value iteration (V only) to the same
  tolerance, and the ratio scipy / ours (default pass);
* load: ``load_dataset`` (read, validate, compile, lay out by task), wall and CPU
  seconds;
* frontier: the per-task trace of every budget's breakpoints, against one budget
  search by solves (the chord search) and against N separate searches; a sweep
  of N budgets answered from the trace (numbers only, and with both policies of
  each budget materialised: by the batched passes of ``search_budgets``, and by
  two solves per budget), one search and the two sweeps alternated
  ``--sweep-repeats`` times (medians), the policies checked identical;
* bandwidth: bytes one solve reads and writes, over the read bandwidth of a large
  numpy copy measured in the same run: the bound, and solve / bound;
* the unconstrained solvers a user might pick instead, if installed from PyPI
  (``mdpsolver``, ``pymdptoolbox``) against ours at the same discount, quiet and
  busy, up to --third-party-max.

``--stream N`` writes a tree dataset of N transitions as parts of whole tasks under
``--dir`` (kept for reruns; never inside the repository), then traces every
part's frontier in a child process whose address space is capped at
``--memory-cap`` (``RLIMIT_AS``), one part at a time, and again on a local Ray
cluster of 2 worker CPUs, reporting time, peak memory and per-task throughput.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np
import pandas as pd
from scipy.stats import trim_mean
from tqdm.auto import tqdm

from helpdp import load_dataset, search_budget, solve
from helpdp.budget import search_budgets, warm_up
from helpdp.contract import build_manifest
from helpdp.data import write_dataset
from helpdp.trace import frontier_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dp_peers import MISSING, scipy_vi, third_party_solvers  # noqa: E402 - the sibling module

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


def history_trees(
    n_transitions: int,
    seed: int = 0,
    episodes_per_task: int = 120,
    task0: int = 0,
    depth: int = DEPTH,
    short: bool = False,
):
    """Per-task history trees with ~n_transitions transitions; returns (manifest,
    states, transitions). ``task0`` offsets task numbers (parts of one dataset).
    ``short``: AWM-1K's shape, many short tasks (a task needs 1-8 progress steps, not
    8-13; with few episodes a task, nearly every state has one transition)."""
    rng = np.random.default_rng([seed, task0])
    per_episode = 5.0 if short else 8.0  # transitions per episode, about
    n_tasks = max(1, int(n_transitions / (episodes_per_task * per_episode)))
    n_ep = n_tasks * episodes_per_task
    task = np.repeat(np.arange(n_tasks, dtype=np.int64), episodes_per_task)
    p_help = rng.choice([0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0], n_ep)
    diff = rng.uniform(0.05, 0.5, n_tasks)[task]
    act = (rng.random((n_ep, depth)) < p_help[:, None]).astype(np.int64)
    u = rng.random((n_ep, depth))
    p_err = np.where(act == 1, 0.05, diff[:, None])
    out = np.where(u < p_err, 1, np.where(u < p_err + 0.15, 2, 0))  # error / slip / progress
    errs = np.cumsum(out == 1, axis=1)
    stop_fail = errs >= 3
    need = 1 + (diff * 15).astype(np.int64) if short else 8 + (diff * 10).astype(np.int64)
    stop_ok = np.cumsum(out == 0, axis=1) >= need[:, None]
    stop = stop_fail | stop_ok
    end = np.where(stop.any(axis=1), np.argmax(stop, axis=1), depth - 1)
    rows = np.arange(n_ep)
    succ = stop_ok[rows, end] & ~stop_fail[rows, end]
    digit = act * 3 + out + 1  # 1..6: the step's (action, outcome)
    base = np.int64(7) ** DEPTH  # history key: task * 7^16 + sum_d digit_d 7^d (< 7^16)
    tkey = (task + task0) * base
    code = np.zeros(n_ep, np.int64)
    end_code = np.zeros(n_ep, np.int64)
    pw = np.int64(1)
    dst, src, acts = [], [], []
    prev = tkey.copy()
    for d in range(depth):
        code = code + digit[:, d] * pw
        pw *= 7
        k = tkey + code
        live = end >= d
        dst.append(k[live])
        src.append(prev[live])
        acts.append(act[live, d])
        end_code = np.where(end == d, code, end_code)
        prev = k
    dst, src, acts = np.concatenate(dst), np.concatenate(src), np.concatenate(acts)
    child, first, count = np.unique(dst, return_index=True, return_counts=True)
    roots = tkey[::episodes_per_task]
    ids = np.sort(np.r_[roots, child])
    term = np.zeros(len(ids), bool)
    success = np.zeros(len(ids), bool)
    pos = np.searchsorted(ids, tkey + end_code)
    term[pos] = True
    success[pos[succ]] = True
    names = np.array([f"task_{i + task0:07d}" for i in range(n_tasks)], dtype=object)
    states = pd.DataFrame(
        {
            "state_id": ids,
            "task_id": pd.array(names[ids // base - task0], dtype="string"),
            "depth": np.zeros(len(ids), np.int32),
            "is_start": np.isin(ids, roots),
            "terminal": term,
            "success": success,
            "text": pd.array(np.full(len(ids), "", dtype=object), dtype="string"),
        }
    )
    trans = pd.DataFrame(
        {
            "state_id": src[first],
            "action": acts[first].astype(np.int8),
            "next_state_id": child,
            "count": count.astype(np.int64),
        }
    )
    trans = trans.sample(frac=1.0, random_state=seed, ignore_index=True)  # collection order
    manifest = build_manifest(["nohelp", "expert"], gamma=1.0, source={"generator": "bench/dp.py"})
    return manifest, states, trans


#: ``--shape``: its dataset of ~n transitions
SHAPES = {
    "tree": history_trees,
    "short": lambda n: history_trees(n, episodes_per_task=7, depth=12, short=True),
    "layered": agent_like,
}


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


class Busy:
    """Two busy-loop processes (the benchmark's own load), stopped on exit."""

    def __init__(self, n: int = 2):
        self.n, self.procs = n, []

    def __enter__(self):
        code = "while True: pass"
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(self.n)]
        time.sleep(1.0)  # let the scheduler see them
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def loadavg() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def interleaved_times(fns: dict, repeats: int) -> dict:
    """Seconds of each of ``fns`` (the mean without the top and bottom 10%), timed in
    turn (a, b, c, a, b, c, ...) after one warm-up each, so that a load that changes
    during the run weighs on all alike. Not the median: under the benchmark's load one
    solve takes 1x or 2x its time depending on whether its CPU is shared with one busy
    loop or not, and the median of such a two-valued sample jumps between the two."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: float(trim_mean(v, 0.1)) for name, v in times.items()}


def solve_times(mdp, repeats: int) -> dict:
    """Median seconds of one solve per pass (interleaved), and, at every numba thread
    count, of the per-task pass and of ``auto`` interleaved with the serial pass:
    ``auto@k / serial@k`` is the ratio the issue bounds (<= 1.1 on a busy machine)."""

    def run(p):
        return lambda: solve(mdp, R, gamma=1.0, parallel=p)

    mdp.cache.pop("passes", None)
    out = interleaved_times({p: run(p) for p in ("serial", "tasks", "levels", "auto")}, repeats)
    n_max = numba.config.NUMBA_NUM_THREADS
    for k in range(1, n_max + 1):
        numba.set_num_threads(k)
        t = interleaved_times(
            {"serial": run("serial"), "tasks": run("tasks"), "auto": run(True)}, repeats
        )
        for name, v in t.items():
            out[f"{name}@{k}"] = v
    numba.set_num_threads(n_max)
    # every solve above but auto's names its pass: what is left is the passes auto ran
    passes = dict(mdp.cache.get("passes", {}))
    forced = {"serial": n_max + 1, "tasks": n_max + 1, "levels": 1}  # runs per pass
    out["auto_ran"] = {p: n - (repeats + 1) * forced.get(p, 0) for p, n in passes.items()}
    return out


def dataset_dir(size: int, args):
    """A context manager giving the directory of the benchmark's dataset of ``size``
    transitions: generated and written there first (``--keep-data``: under
    ``--dir``, reused by later runs; else a temporary directory)."""

    @contextlib.contextmanager
    def kept():
        path = Path(args.dir) / f"helpdp-bench-{args.shape}-{size:.3g}"
        if not (path / "manifest.json").exists():
            generate(path)
        else:
            print(f"reusing {path}")
        yield path

    @contextlib.contextmanager
    def temporary():
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            generate(Path(tmp))
            yield Path(tmp)

    def generate(path):
        t = time.perf_counter()
        frames = SHAPES[args.shape](size)
        write(path, *frames)
        print(f"built and wrote dataset in {time.perf_counter() - t:.1f}s")

    return kept() if args.keep_data else temporary()


def bench_size(size: int, args, bw: float) -> dict:
    print(f"\n== {size:.2e} transitions ({args.shape}) ==")
    with dataset_dir(size, args) as path:
        t, c = time.perf_counter(), time.process_time()
        ds = load_dataset(path)
        t_load, c_load = time.perf_counter() - t, time.process_time() - c
    mdp = ds.mdp
    print(
        f"{mdp.n_states} states, {mdp.n_rows} state-actions, {mdp.n_transitions} transitions, "
        f"{len(mdp.comp_ptr) - 1} tasks (largest {np.diff(mdp.comp_ptr).max()} states), "
        f"{len(mdp.block_ptr) - 1} levels"
    )
    print(f"load            {t_load:8.3f} s   ({c_load:.3f} CPU-s, load average {loadavg()})")
    res = {"size": size, "load": t_load, "load_cpu": c_load}
    sections = args.sections.split(",")
    if "solves" in sections:
        bench_solves(mdp, args, res)
    if "frontier" in sections:
        bench_frontier(mdp, args, res)
    if "solves" in sections:
        bench_bandwidth(mdp, args, res, bw, size)
    return res


SECTIONS = ("solves", "frontier")


def bench_solves(mdp, args, res: dict) -> None:
    """One solve by each pass, quiet and under load, against scipy's value iteration."""
    base = scipy_vi(mdp, R, 1.0)
    v_ref, iters = base()
    ours = solve(mdp, R, gamma=1.0)
    assert np.allclose(ours.values[:, 0], v_ref, atol=1e-9), "baseline disagrees"
    for state in ("quiet", "busy"):
        ctx = Busy() if state == "busy" else None
        if ctx:
            ctx.__enter__()
        try:
            la = loadavg()
            times = solve_times(mdp, args.repeats)
            t_scipy = median_time(base, 3)
        finally:
            if ctx:
                ctx.__exit__()
        res[state] = {**times, "scipy": t_scipy, "loadavg": la}
        threads = "  ".join(
            f"{k.split('@')[1]}:{v * 1e3:.1f}" for k, v in times.items() if "tasks@" in k
        )
        autos = "  ".join(
            f"{k.split('@')[1]}:{v * 1e3:.1f} ({v / times[k.replace('auto', 'serial')]:.2f}x serial)"
            for k, v in times.items()
            if "auto@" in k
        )
        print(
            f"[{state}, load average {la}] solve ms: serial {times['serial'] * 1e3:.1f}  "
            f"tasks {times['tasks'] * 1e3:.1f}  levels {times['levels'] * 1e3:.1f}  "
            f"auto {times['auto'] * 1e3:.1f}  | tasks by threads {threads}  | auto by threads "
            f"{autos}"
        )
        print(
            f"[{state}] scipy VI {t_scipy * 1e3:.1f} ms ({iters} sweeps, V only) -> auto is "
            f"{t_scipy / times['auto']:.1f}x faster; auto's worst thread count / serial = "
            f"{max(v / times[k.replace('auto', 'serial')] for k, v in times.items() if 'auto@' in k):.2f}"
            f"; auto ran {times['auto_ran']}"
        )


def bench_frontier(mdp, args, res: dict) -> None:
    """The per-task trace, one search by solves, N searches, and sweeps of N budgets:
    numbers only, and with both policies of every budget materialised (batched, and
    by two solves per budget). One search and the two sweeps alternate
    ``--sweep-repeats`` times (medians; on a shared machine a single run is noise)."""
    u0 = solve(mdp, 0.0, gamma=1.0).total_usage
    u1 = solve(mdp, 1e9, gamma=1.0).total_usage
    budgets = [float(b) for b in u1 + np.linspace(0.05, 0.95, args.budgets) * (u0 - u1)]
    # (results are kept as numbers only: the Solutions held would take n * 50 bytes per
    # search, memory the sweeps below would then page in at a higher price)
    t = time.perf_counter()
    many = [search_budget(mdp, b, gamma=1.0, method="solves").expected_success for b in budgets]
    t_many = time.perf_counter() - t
    mdp.cache.clear()
    t = time.perf_counter()
    fr = frontier_of(mdp, gamma=1.0)
    t_trace = time.perf_counter() - t
    t = time.perf_counter()
    qs = [fr.query(b) for b in budgets]
    t_query = time.perf_counter() - t

    def one_search():
        return search_budget(mdp, budgets[len(budgets) // 2], gamma=1.0, method="solves").solves

    def batched():  # each result dropped once read, as the command line does
        out = []
        for f in search_budgets(mdp, budgets, gamma=1.0):
            out.append(f.expected_success)
            del f  # before the next batch is computed (a batch's Solutions share memory)
        return out

    def two_solves_each():
        return [search_budget(mdp, b, gamma=1.0).expected_success for b in budgets]

    times = {"one": [], "batched": [], "loop": []}
    for _ in range(args.sweep_repeats):
        for name, fn in (("one", one_search), ("batched", batched), ("loop", two_solves_each)):
            t, c = time.perf_counter(), time.process_time()
            out = fn()
            times[name].append((time.perf_counter() - t, time.process_time() - c))
            if name == "one":
                n_solves = out
            elif name == "batched":
                full = out
    med = {k: float(np.median([w for w, _ in v])) for k, v in times.items()}
    cpu = {k: float(np.median([c for _, c in v])) for k, v in times.items()}
    t_one, t_full, t_loop = med["one"], med["batched"], med["loop"]
    same = all(
        all(
            (x is None and y is None)
            or (np.array_equal(x.action, y.action) and np.array_equal(x.values, y.values))
            for x, y in ((f.policy, g.policy), (f.more_help, g.more_help))
        )
        for f, g in zip(
            search_budgets(mdp, budgets, gamma=1.0),
            (search_budget(mdp, b, gamma=1.0) for b in budgets),
        )
    )
    err = max(max(abs(q.expected_success - m), abs(f - m)) for q, f, m in zip(qs, full, many))
    res.update(
        trace=t_trace,
        one_search=t_one,
        n_searches=t_many,
        queries=t_query,
        sweep_policies=t_full,
        sweep_loop=t_loop,
        n_budgets=len(budgets),
        frontier=len(fr),
    )
    print(
        f"frontier trace  {t_trace:8.3f} s   ({len(fr)} frontier policies, {fr.n_tasks} tasks); "
        f"one search by solves {t_one:.3f} s ({n_solves} solves; {cpu['one']:.3f} CPU-s); "
        f"{len(budgets)} searches by solves {t_many:.3f} s"
    )
    print(
        f"sweep of {len(budgets)} budgets from the trace: {t_trace + t_query:.3f} s numbers only "
        f"({(t_trace + t_query) / t_one:.2f}x one search; "
        f"{t_many / (t_trace + t_query):.1f}x faster than {len(budgets)} searches); "
        f"max |E[S] difference| {err:.1e}"
    )
    print(
        f"sweep with both policies per budget (medians of {args.sweep_repeats}, load average "
        f"{loadavg()}): {t_trace + t_full:.3f} s batched ({(t_trace + t_full) / t_one:.2f}x one "
        f"search; CPU {(t_trace + cpu['batched']) / cpu['one']:.2f}x), {t_trace + t_loop:.3f} s "
        f"by two solves per budget ({(t_trace + t_loop) / t_one:.2f}x; CPU "
        f"{(t_trace + cpu['loop']) / cpu['one']:.2f}x); policies identical: {same}"
    )


def bench_bandwidth(mdp, args, res: dict, bw: float, size: int) -> None:
    """A solve's bytes against the copy bandwidth; third-party solvers (layered)."""
    ours = solve(mdp, R, gamma=1.0)
    touched = mdp.nbytes + 2 * ours.values.nbytes + ours.action.nbytes
    # the same solve in the 64-bit layout (int64 pointers, an int64 order array read)
    wide = touched + 8 * (mdp.sa_ptr.size + mdp.tr_ptr.size) - mdp.sa_ptr.nbytes - mdp.tr_ptr.nbytes
    wide += 8 * mdp.n_states - (0 if mdp.comp_ptr is not None else mdp.order.nbytes)
    bound = touched / bw
    t_q = res["quiet"]["auto"]
    print(
        f"bytes per solve {touched / 2**20:8.1f} MiB ({touched / mdp.n_transitions:.1f} per "
        f"transition; {wide / mdp.n_transitions:.1f} in the 64-bit layout)"
    )
    print(
        f"bandwidth       {touched / t_q / 1e9:8.2f} GB/s read+written by a solve; bound "
        f"{bound * 1e3:.1f} ms -> solve is {t_q / bound:4.2f}x the bandwidth bound"
    )
    res["bound"] = bound
    if size <= args.third_party_max:
        bench_peers(mdp, res)


def bench_peers(mdp, res: dict) -> None:
    """The installed third-party solvers (``dp_peers.third_party_solvers``) against
    ours at the same discount, on the same MDP, quiet and with the two busy loops;
    each pair interleaved (3 solves each after a warm-up)."""
    peers = third_party_solvers(mdp, R, 0.99)
    for name, hint in MISSING.items():
        if name not in peers:
            print(f"{name:<46} not installed ({hint})")
    ours = {g: (lambda g=g: solve(mdp, R, gamma=g)) for g in (1.0, 0.99)}
    for state in ("quiet", "busy"):
        ctx = Busy() if state == "busy" else contextlib.nullcontext()
        with ctx:
            la = loadavg()
            for name, (fn, g) in peers.items():
                t = interleaved_times({"ours": ours[g], name: fn}, 3)
                res.setdefault("peers", {}).setdefault(state, {})[name] = (t[name], t["ours"])
                print(
                    f"[{state}, load average {la}] {name} (gamma {g:g}) {t[name] * 1e3:8.1f} ms, "
                    f"ours {t['ours'] * 1e3:.1f} ms -> ours is {t[name] / t['ours']:.1f}x faster"
                )


def write_parts_to(root: Path, n_transitions: float, per_part: float, generate: int = 3):
    """The streamed benchmark's parts (whole tasks each), written once and reused.

    The first ``generate`` parts are generated (``history_trees``); generating 10^8
    transitions takes ~2 CPU-minutes per 10^7 here, so the others are copies of
    part 0 with fresh state ids and task names and every count re-drawn (times
    1, 2 or 3, per part seed): the same trees, other probabilities, other
    frontiers. Returns the part directories."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    root.mkdir(parents=True, exist_ok=True)
    n_parts = int(np.ceil(n_transitions / per_part))
    tasks_per_part = max(1, int(per_part / (120 * 8.0)))
    paths = []
    t0 = time.perf_counter()
    for i in range(n_parts):
        p = root / f"part-{i:05d}"
        if (p / "manifest.json").exists():
            paths.append(p)
            continue
        if i < generate:
            manifest, states, trans = history_trees(int(per_part), seed=1, task0=i * tasks_per_part)
            write(p, manifest, states, trans)
        else:
            src = root / "part-00000"
            st = pq.read_table(src / "states.parquet")
            tr = pq.read_table(src / "transitions.parquet")
            ids = st.column("state_id").to_numpy()
            order = np.argsort(ids)
            stride = len(ids) * 7919 + 101

            def remap(col, ids=ids, order=order, stride=stride, i=i):
                rank = order[np.searchsorted(ids, col.to_numpy(), sorter=order)]
                return pa.array(rank * 7919 + 13 + i * stride)

            rng = np.random.default_rng([2, i])
            st = st.set_column(0, "state_id", remap(st.column("state_id")))
            names = pc.binary_join_element_wise(f"p{i:05d}_", st.column("task_id"), "")
            st = st.set_column(st.schema.get_field_index("task_id"), "task_id", names)
            tr = tr.set_column(0, "state_id", remap(tr.column("state_id")))
            k = tr.schema.get_field_index("next_state_id")
            tr = tr.set_column(k, "next_state_id", remap(tr.column("next_state_id")))
            k = tr.schema.get_field_index("count")
            cnt = tr.column("count").to_numpy() * rng.integers(1, 4, tr.num_rows)
            tr = tr.set_column(k, "count", pa.array(cnt))
            tmp = root / f".tmp-{i:05d}"
            tmp.mkdir(exist_ok=True)
            pq.write_table(st, tmp / "states.parquet")
            pq.write_table(tr, tmp / "transitions.parquet")
            (tmp / "manifest.json").write_bytes((src / "manifest.json").read_bytes())
            tmp.rename(p)
        print(f"wrote {p.name} ({time.perf_counter() - t0:.0f}s)", flush=True)
        paths.append(p)
    return paths


def trace_child(root: str, engine: str) -> None:
    """Body of the capped child process: trace the parts, print one JSON line."""
    from helpdp.stream import trace_parts

    if engine == "ray":
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        res = trace_parts(root, engine=engine, log=lambda m: print(m, file=sys.stderr))
    finally:
        if engine == "ray":
            ray.shutdown()
    fr = res.frontier
    print(
        json.dumps(
            {
                "engine": engine,
                "parts": res.parts,
                "transitions": res.transitions,
                "tasks": fr.n_tasks,
                "frontier": len(fr),
                "breakpoint_mib": res.breakpoints.nbytes / 2**20,
                "seconds": res.seconds,
                "peak_rss_mib": res.peak_rss_bytes / 2**20,
                "worker_peak_rss_mib": res.worker_peak_rss_bytes / 2**20,
                "budget_1": {
                    k: v
                    for k, v in __import__("helpdp.stream").stream.answer(fr, 1.0).items()
                    if k != "mixture"
                },
            }
        )
    )


def parse_bytes(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].isalpha() else int(text)


def bench_stream(args) -> None:
    if args.parts_dir:
        root = Path(args.parts_dir)
        paths = sorted(p for p in root.iterdir() if (p / "manifest.json").exists())
    else:
        root = Path(args.dir) / "helpdp-stream"
        paths = write_parts_to(root, float(args.stream), float(args.part_size))
    cap = parse_bytes(args.memory_cap)
    print(
        f"\n== streamed: {len(paths)} parts under {root}, address space capped at "
        f"{cap / 2**30:.1f} GiB per process =="
    )
    for engine in args.engines.split(","):

        def limit(cap=cap):
            os.nice(10)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

        t = time.perf_counter()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cmd = [sys.executable, __file__, "--trace-child", str(root), "--engine", engine]
        out = subprocess.run(
            cmd, capture_output=True, text=True, preexec_fn=limit if engine == "local" else None
        )
        wall = time.perf_counter() - t
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        if out.returncode != 0:
            print(f"{engine}: failed ({out.returncode}): {out.stderr[-2000:]}")
            continue
        js = json.loads(out.stdout.strip().splitlines()[-1])
        per_task = js["seconds"] / js["tasks"]
        print(
            f"{engine:5s}: {js['transitions']:.3e} transitions, {js['tasks']} tasks, "
            f"{js['frontier']} frontier policies in {js['seconds']:.1f} s "
            f"({wall:.1f} s with start-up, {cpu:.1f} CPU-s in the child; for Ray the "
            f"driver only); load average {loadavg()}; peak RSS {js['peak_rss_mib']:.0f} MiB "
            f"(worker {js['worker_peak_rss_mib']:.0f} MiB); breakpoints {js['breakpoint_mib']:.1f} "
            f"MiB; {js['transitions'] / js['seconds'] / 1e6:.2f} M transitions/s, "
            f"{per_task * 1e3:.2f} ms per task; budget 1: {js['budget_1']}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="2.2e6,1e7", help="transition counts, comma separated")
    ap.add_argument("--shape", choices=tuple(SHAPES), default="tree")
    ap.add_argument("--repeats", type=int, default=7, help="solves per median")
    ap.add_argument("--budgets", type=int, default=20, help="budgets of the sweep")
    ap.add_argument(
        "--sweep-repeats",
        type=int,
        default=3,
        help="alternations of one search and the two sweeps (medians)",
    )
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where data is written")
    ap.add_argument(
        "--sections",
        default="solves,frontier",
        help="what to time after the load: solves (passes, scipy, bandwidth), frontier",
    )
    ap.add_argument(
        "--keep-data",
        action="store_true",
        help="keep each generated dataset under --dir and reuse it in later runs",
    )
    ap.add_argument(
        "--third-party-max",
        type=float,
        default=2.2e6,
        help="largest size to run the third-party solvers on (both shapes)",
    )
    ap.add_argument("--stream", type=float, default=None, help="streamed run: transitions")
    ap.add_argument("--part-size", type=float, default=2.5e6, help="transitions per part")
    ap.add_argument("--memory-cap", default="3G", help="address-space cap of the streamed run")
    ap.add_argument("--parts-dir", default=None, help="stream these existing parts instead")
    ap.add_argument("--engines", default="local,ray", help="streamed run: local, ray or both")
    ap.add_argument("--trace-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--engine", default="local", help=argparse.SUPPRESS)
    args = ap.parse_args()
    unknown = sorted(set(args.sections.split(",")) - set(SECTIONS))
    if unknown:
        ap.error(f"--sections: unknown {', '.join(unknown)} (known: {', '.join(SECTIONS)})")
    if args.trace_child:
        return trace_child(args.trace_child, args.engine)
    if Path(args.dir).resolve().is_relative_to(Path(__file__).resolve().parents[1]):
        raise SystemExit("--dir must be outside the repository")
    print(
        f"numba threads {numba.get_num_threads()}, cpus {os.cpu_count()}, load average {loadavg()}"
    )
    if args.stream or args.parts_dir:
        return bench_stream(args)
    bw = copy_read_bandwidth()
    print(f"numpy copy read bandwidth: {bw / 1e9:.2f} GB/s")
    small = load_dataset_small()  # compile (or load the numba cache) first
    warm_up(small, gamma=1.0)
    rows = [bench_size(int(float(s)), args, bw) for s in args.sizes.split(",")]
    print("\nsummary (ratios are measured in this run):")
    for r in rows:
        line = f"{r['size']:.1e}  load {r['load']:6.2f} s ({r['load_cpu']:.2f} CPU-s)"
        if "quiet" in r:
            q, b = r["quiet"], r["busy"]
            line += (
                f"  quiet auto {q['auto'] * 1e3:.1f} ms (scipy/auto {q['scipy'] / q['auto']:.1f})"
                f"  busy auto {b['auto'] * 1e3:.1f} ms (scipy/auto {b['scipy'] / b['auto']:.1f})"
            )
        if "trace" in r:
            one = r["one_search"]
            line += (
                f"  trace {r['trace']:.3f} s  sweep/one search: numbers "
                f"{(r['trace'] + r['queries']) / one:.2f}, policies "
                f"{(r['trace'] + r['sweep_policies']) / one:.2f} (two solves per budget "
                f"{(r['trace'] + r['sweep_loop']) / one:.2f})"
            )
        print(line)


def load_dataset_small():
    from helpdp import demo_dataset_path

    return load_dataset(demo_dataset_path()).mdp


if __name__ == "__main__":
    tqdm.monitor_interval = 0
    main()
