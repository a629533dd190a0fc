"""Frontiers past one machine: trace a dataset partitioned by task, one part at a
time under a memory bound, or on Ray workers, and merge.

A *partitioned dataset* is a directory of parts, each a dataset directory of the
contract (``manifest.json``, ``states.parquet``, ``transitions.parquet``) holding
whole tasks, all with the same actions and gamma (``write_parts`` writes one from
a dataset; a collector's shards grouped by task are such parts). Since tasks
never connect, a part's frontier (``helpdp.trace.Breakpoints``: its breakpoints in
r with the jumps of the start-weighted E[U], E[S] sums) is independent of every
other part, and the global frontier is their merge. Only the breakpoints stay in
memory between parts (24 bytes each); a part's own model is freed before the
next is read. A transition into another part's state is refused by the loader
(an unknown ``next_state_id``).

``trace_parts(parts)`` reads the parts in turn (``engine="local"``) or hands them
to Ray tasks (``engine="ray"``, on the cluster ``ray.init`` joined: each worker
loads and traces whole parts, only the breakpoints travel back). ``answer``
reads budgets off the merged frontier as search.json's numbers.
"""

from __future__ import annotations

import json
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helpdp.contract import MANIFEST_FILE, DatasetError
from helpdp.data import Dataset, load_dataset, write_dataset
from helpdp.subset import task_subset
from helpdp.trace import Breakpoints, InfeasibleBudget, TracedFrontier, trace_breakpoints

# peak memory of loading and tracing a part, per byte of its Parquet files
# (measured: ~12x on history trees; the decoded tables, the model, the sort keys)
BYTES_PER_PARQUET_BYTE = 16


@dataclass
class StreamResult:
    """The merged frontier of a partitioned dataset and how it was computed."""

    frontier: TracedFrontier
    breakpoints: Breakpoints
    parts: int
    transitions: int
    seconds: float
    peak_rss_bytes: int  # this process's peak resident memory (the driver's, for Ray)
    engine: str
    worker_peak_rss_bytes: int = 0  # the largest peak of the processes that traced parts


def list_parts(path: str | Path) -> list[Path]:
    """The parts of a partitioned dataset: its sub-directories with a manifest, sorted."""
    path = Path(path)
    if not path.is_dir():
        raise DatasetError(f"{path}: not a directory of dataset parts")
    parts = sorted(p for p in path.iterdir() if (p / MANIFEST_FILE).exists())
    if not parts:
        raise DatasetError(f"{path}: no part (a sub-directory with {MANIFEST_FILE})")
    return parts


def part_bytes(part: Path) -> int:
    return sum(f.stat().st_size for f in part.glob("*.parquet"))


def _check_manifests(parts: list[Path]) -> dict:
    first = json.loads((parts[0] / MANIFEST_FILE).read_text())
    for p in parts[1:]:
        m = json.loads((p / MANIFEST_FILE).read_text())
        for key in ("actions", "gamma", "format"):
            if m.get(key) != first.get(key):
                raise DatasetError(
                    f"{p / MANIFEST_FILE}: field '{key}' is {m.get(key)!r} but "
                    f"{parts[0] / MANIFEST_FILE} has {first.get(key)!r}: parts must agree"
                )
    return first


def trace_part(
    part, *, gamma: float | None = None, tie_tol: float = 1e-12, threads: int | None = None
):
    """Load one part and trace its tasks' frontiers: ``(Breakpoints, transitions, peak
    resident bytes of this process)``.
    ``threads``: numba threads to use (a Ray worker takes one CPU: 1)."""

    if threads is not None:
        import numba

        numba.set_num_threads(min(int(threads), numba.config.NUMBA_NUM_THREADS))

    ds = load_dataset(part, gamma=gamma)
    mdp = ds.mdp
    if mdp.n_actions != 2 or not mdp.acyclic:
        raise DatasetError(
            f"{part}: the streamed frontier needs one intervention and an acyclic graph"
        )
    bp = trace_breakpoints(mdp, gamma=ds.gamma, tie_tol=tie_tol)
    if bp is None:
        raise DatasetError(f"{part}: a task is too large for the per-task trace")
    return bp, mdp.n_transitions, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def trace_parts(
    path: str | Path,
    *,
    gamma: float | None = None,
    tie_tol: float = 1e-12,
    engine: str = "local",
    memory_bound: int | None = None,
    log=None,
) -> StreamResult:
    """The global frontier of the partitioned dataset at ``path``.

    ``memory_bound`` (bytes): refuse, before reading anything, a part whose
    estimated peak (``BYTES_PER_PARQUET_BYTE`` per byte of its Parquet files)
    exceeds it; the merge itself holds 24 bytes per breakpoint.
    """
    if engine not in ("local", "ray"):
        raise ValueError(f"engine must be 'local' or 'ray', got {engine!r}")
    parts = list_parts(path)
    manifest = _check_manifests(parts)
    g = float(manifest["gamma"]) if gamma is None else float(gamma)
    if memory_bound is not None:
        for p in parts:
            need = BYTES_PER_PARQUET_BYTE * part_bytes(p)
            if need > memory_bound:
                raise DatasetError(
                    f"{p}: needs about {need / 2**20:.0f} MiB to trace "
                    f"({part_bytes(p) / 2**20:.1f} MiB of Parquet), more than the memory bound "
                    f"of {memory_bound / 2**20:.0f} MiB: split it into smaller task groups"
                )
    t0 = time.perf_counter()
    results: list[tuple[Breakpoints, int, int]] = []
    if engine == "local":
        for i, p in enumerate(parts):
            results.append(trace_part(p, gamma=g, tie_tol=tie_tol))
            if log:
                log(
                    f"part {i + 1}/{len(parts)} {p.name}: {results[-1][1]} transitions, "
                    f"{len(results[-1][0].r)} breakpoints ({time.perf_counter() - t0:.1f}s)"
                )
    else:
        import ray

        if not ray.is_initialized():
            raise RuntimeError("engine='ray' needs ray.init() first (a local or remote cluster)")
        remote = ray.remote(num_cpus=1)(trace_part)
        refs = [remote.remote(str(p), gamma=g, tie_tol=tie_tol, threads=1) for p in parts]
        pending = list(refs)
        while pending:  # collect as they finish; only breakpoints travel back
            done, pending = ray.wait(pending, num_returns=1)
            if log:
                log(
                    f"{len(refs) - len(pending)}/{len(refs)} parts traced "
                    f"({time.perf_counter() - t0:.1f}s)"
                )
        results = ray.get(refs)
    bp = Breakpoints.merge([r[0] for r in results])
    fr = TracedFrontier.from_breakpoints(bp, time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return StreamResult(
        frontier=fr,
        breakpoints=bp,
        parts=len(parts),
        transitions=int(sum(r[1] for r in results)),
        seconds=time.perf_counter() - t0,
        peak_rss_bytes=int(peak),
        engine=engine,
        worker_peak_rss_bytes=int(max(r[2] for r in results)),
    )


def answer(fr: TracedFrontier, budget: float) -> dict:
    """search.json's numbers (docs/method.md, "Outputs") for ``budget``, read off ``fr``."""
    try:
        q = fr.query(float(budget))
    except InfeasibleBudget as e:
        raise ValueError(str(e)) from None
    mixture = None
    if q.more_help is not None:
        mixture = {
            "r": q.r,
            "weight_more_help": q.weight_more_help,
            "more_help": {
                "expected_usage": q.more_help.expected_usage,
                "expected_success": q.more_help.expected_success,
            },
            "less_help": {
                "expected_usage": q.less_help.expected_usage,
                "expected_success": q.less_help.expected_success,
            },
        }
    return {
        "budget": float(budget),
        "r": q.r,
        "expected_usage": min(q.expected_usage, float(budget)),
        "expected_success": q.expected_success,
        "mixture": mixture,
    }


def write_parts(ds: Dataset, out: str | Path, *, tasks_per_part: int) -> list[Path]:
    """Split dataset ``ds`` into parts of ``tasks_per_part`` whole tasks under ``out``
    (``part-00000``, ...), each a dataset directory of the contract."""

    tasks = sorted(ds.states["task_id"].astype(str).unique())
    out = Path(out)
    paths = []
    for i in range(0, len(tasks), tasks_per_part):
        sub = task_subset(ds, tasks[i : i + tasks_per_part])
        p = out / f"part-{i // tasks_per_part:05d}"
        write_dataset(p, sub.manifest, {"states": sub.states, "transitions": sub.transitions})
        paths.append(p)
    return paths


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def frontier_arrays(fr: TracedFrontier) -> dict[str, np.ndarray]:
    """The frontier's arrays (``starts``, ``usage``, ``success``), e.g. to save."""
    return {"starts": fr.starts, "usage": fr.usage, "success": fr.success}
