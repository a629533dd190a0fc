"""Instructions per serial backward pass of the DP, counted by callgrind: a measure that
repeats to the instruction on a loaded machine, where wall-clock and CPU times do not.

    python bench/dp_callgrind.py                          # 2.2 * 10^6 transitions (tree)
    python bench/dp_callgrind.py --size 1e6 --rules exact --index 32,64 --dir /tmp
    python bench/dp_callgrind.py --kernel costs --costs 2  # the batched pass, 2 help costs

``--kernel sweep`` (the default) counts ``kernels.backward_pass``, the pass of a serial
solve, for each ``--rules``; ``--kernel costs`` counts ``parametric.sweep_costs``, the
batched exact pass of ``solve.solve_costs`` (budget searches), at ``--costs`` help
costs at once, writing every state's values as ``solve_costs`` does (one call over
every task: no threads).

The dataset is bench/dp.py's tree shape (``history_trees``), written under ``--dir``
(never inside the repository) and reused by later runs; the loaded model's kernel arrays
are saved beside it. For each rule and index width (32: the arrays as loaded; 64: cast
to int64), a child process runs ``kernels.backward_pass`` (the call of a serial solve)
``--passes`` + 1 times under ``valgrind --tool=callgrind``. The jitted code has no
symbols: callgrind books it as one block of an unnamed object (``???:0x...``), whose own
cost over the number of passes is the count per pass (the first pass loads numba's cache,
outside that block; every pass costs the same, to the instruction).

Under valgrind numba compiles for the CPU that valgrind presents (e.g. "haswell", no
AVX-512), not the host's, so the counts compare versions of the code with each other, not
with the host's instruction stream; a run under ``valgrind --tool=none`` first fills
numba's cache for that CPU, so the counted run compiles nothing. As a second signal the
parent prints the median CPU time (``time.process_time``) of a pass run natively.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RULES = {"exact": 0, "paper": 1}
R = 0.3  # help cost, as bench/dp.py's single solves
_JIT_BLOCK = re.compile(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+\?\?\?:0x[0-9a-fA-F]+\s+\[\?\?\?\]\s*$")


def jit_block_cost(annotate_text: str) -> int:
    """The largest own cost of a block in no named object (the jitted code) in the text
    of ``callgrind_annotate``."""
    costs = [
        int(m.group(1).replace(",", ""))
        for m in map(_JIT_BLOCK.match, annotate_text.splitlines())
        if m
    ]
    if not costs:
        raise ValueError("callgrind_annotate: no block of an unnamed object (???:0x...) found")
    return max(costs)


def _arrays(npz: Path, index: int):
    from helpdp._src.bundles import Graph

    z = np.load(npz)
    ints = {
        k: z[k].astype(np.int64) if index == 64 else z[k] for k in ("sa_ptr", "tr_ptr", "tr_next")
    }
    rest = {k: z[k] for k in ("sa_action", "tr_prob", "terminal", "success")}
    return Graph(**ints, **rest)


def _run_costs(npz: Path, index: int, passes: int, n_costs: int) -> list[float]:
    """``passes`` + 1 batched passes at ``n_costs`` help costs; CPU seconds as
    ``_run_passes``."""
    from helpdp._src import parametric
    from helpdp._src.bundles import Values

    g = _arrays(npz, index)
    z = np.load(_task_npz(npz))
    comp_ptr = z["comp_ptr"].astype(np.int64) if index == 64 else z["comp_ptr"]
    starts = np.flatnonzero(z["start_weight"] != 0.0)
    n = g.terminal.shape[0]
    r = np.linspace(0.1, 0.5, n_costs) if n_costs > 1 else np.array([R])
    out = Values(np.empty((n_costs, n, 3)), np.empty((n_costs, n), np.int8))
    start_vals = np.empty((starts.shape[0], n_costs, 3))
    times = []
    for _ in range(passes + 1):
        t = time.process_time()
        parametric.sweep_costs(comp_ptr, g, r, 1.0, 1e-12, starts, start_vals, out)
        times.append(time.process_time() - t)
    return times[1:]


def _run_passes(npz: Path, rule: str, index: int, passes: int) -> list[float]:
    """``passes`` + 1 serial passes (the first a warm-up); CPU seconds of the others."""
    from helpdp._src import kernels
    from helpdp._src.bundles import Backup, Values

    if rule.startswith("costs"):  # the batched pass at int(rule[5:]) help costs
        return _run_costs(npz, index, passes, int(rule[5:]))
    g = _arrays(npz, index)
    n = g.terminal.shape[0]
    p_row = np.linspace(0.2, 0.9, g.sa_action.shape[0]) if rule == "paper" else np.zeros(0)
    b = Backup(p_row, np.array([0.0, R]), 1.0, RULES[rule], 1e-12, 1e-9)
    out = [Values(np.zeros((n, 3)), np.full(n, -1, np.int8)) for _ in range(2)]
    order = np.zeros(0, np.int64)  # laid out by task: n - 1, ..., 0, as solve passes it
    times = []
    for i in range(passes + 1):
        t = time.process_time()
        kernels.backward_pass(order, g, b, out[i % 2])
        times.append(time.process_time() - t)
    return times[1:]


def _task_npz(npz: Path) -> Path:
    """The file beside the kernel arrays ``npz`` with the task layout of its model
    (``comp_ptr``, ``start_weight``: the batched pass's)."""
    return npz.with_name(npz.name.replace(".kernel-arrays.npz", ".task-arrays.npz"))


def _dataset(size: float, where: Path) -> Path:
    """The tree dataset of ``size`` transitions under ``where`` (written once), and the
    kernel arrays of its loaded model (and its task layout, ``_task_npz``); returns the
    arrays' file."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from dp import history_trees, write  # the sibling benchmark's generator

    from helpdp import load_dataset

    path = where / f"helpdp-bench-tree-{size:.3g}"  # bench/dp.py --keep-data's name
    npz = where / f"helpdp-bench-tree-{size:.3g}.kernel-arrays.npz"
    if not npz.exists() or not _task_npz(npz).exists():
        if not (path / "manifest.json").exists():
            write(path, *history_trees(int(size)))
        m = load_dataset(path).mdp
        if m.comp_ptr is None:
            raise ValueError(f"{path}: not laid out by task; the serial pass would read an order")
        keep = ("sa_ptr", "sa_action", "tr_ptr", "tr_next", "tr_prob", "terminal", "success")
        if not npz.exists():
            np.savez(npz, **{k: getattr(m, k) for k in keep})
        np.savez(_task_npz(npz), comp_ptr=m.comp_ptr, start_weight=m.start_weight)
    return npz


def _count(npz: Path, rule: str, index: int, passes: int) -> int:
    child = [sys.executable, __file__, "--child", str(npz), rule, str(index), str(passes)]
    vg = ["valgrind", "--smc-check=all-non-file"]
    subprocess.run([*vg, "-q", "--tool=none", *child[:-1], "0"], check=True, capture_output=True)
    out = npz.with_suffix(f".callgrind-{rule}-{index}")  # kept for callgrind_annotate
    subprocess.run(
        [*vg, "--tool=callgrind", f"--callgrind-out-file={out}", *child],
        check=True,
        capture_output=True,
    )
    text = subprocess.run(
        ["callgrind_annotate", str(out)], check=True, capture_output=True, text=True
    )
    return jit_block_cost(text.stdout) // (passes + 1)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size", type=float, default=2.2e6, help="transitions of the tree dataset")
    ap.add_argument("--kernel", default="sweep", choices=("sweep", "costs"), help="the pass")
    ap.add_argument("--rules", default="exact,paper", help="exact, paper or both (sweep)")
    ap.add_argument("--costs", type=int, default=2, help="help costs of a batched pass (costs)")
    ap.add_argument("--index", default="32", help="index widths: 32 (as loaded), 64, or 32,64")
    ap.add_argument("--passes", type=int, default=1, help="counted passes after the warm-up")
    ap.add_argument("--cpu-repeats", type=int, default=15, help="native passes per CPU median")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the dataset is kept")
    ap.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        npz, rule, index, passes = args.child
        _run_passes(Path(npz), rule, int(index), int(passes))
        return
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            raise SystemExit(f"dp_callgrind: {tool} not found on PATH (install valgrind)")
    rules, widths = args.rules.split(","), [int(w) for w in args.index.split(",")]
    if set(rules) - set(RULES) or set(widths) - {32, 64} or args.costs < 1:
        raise SystemExit(
            f"dp_callgrind: --rules from {sorted(RULES)}, --index from 32, 64, --costs >= 1"
        )
    if args.kernel == "costs":
        rules = [f"costs{args.costs}"]
    npz = _dataset(args.size, Path(args.dir))
    z = np.load(npz)
    n, n_tr = z["terminal"].shape[0], z["tr_next"].shape[0]
    print(f"{n} states, {z['sa_action'].shape[0]} rows, {n_tr} transitions ({npz})")
    for rule in rules:
        for index in widths:
            ir = _count(npz, rule, index, args.passes)
            cpu = np.median(_run_passes(npz, rule, index, args.cpu_repeats)) * 1e3
            print(
                f"{rule:5s} int{index}: {ir:,} instructions per pass ({ir / n:.1f} per state), "
                f"CPU median {cpu:.1f} ms (native, {args.cpu_repeats} passes)"
            )


if __name__ == "__main__":
    main()
