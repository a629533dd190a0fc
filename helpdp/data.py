"""Read, validate and compile a dataset directory (docs/data-format.md).

``load_dataset(path)`` reads ``manifest.json``, ``states.parquet``,
``transitions.parquet`` and, when present, ``scores.parquet``, ``episodes.parquet``
and ``steps.parquet``; it checks every rule of the contract with vectorized numpy
and numba kernels (no Python loop per row; state ids are found through one hash
table, transitions grouped by a radix sort) and refuses bad input with one
``DatasetError`` naming the file, the column and the first offending row. Nothing is half-loaded: the
``Dataset`` only exists once every check passed. The tables' columns and types,
the manifest's ``format`` and the error are declared in :mod:`helpdp.contract`
(which also writes datasets).

The transition graph is compiled into ``MDP``: CSR arrays over states ->
state-action rows -> transitions. When the graph is acyclic, states are
renumbered task by task (connected components, each contiguous) and breadth-first
topologically inside each, so that a task's states sit together, successors near
their parents, and each task can be solved on its own (``helpdp._src.pertask``).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from helpdp._src import pertask
from helpdp._src.bundles import Csr, Graph, Rows, index_dtype
from helpdp.contract import (
    DATASET_FILES,
    FORMAT_VERSION,
    MANIFEST_FILE,
    REQUIRED_TABLES,
    SCHEMAS,
    DatasetError,
    _sweep,
    _tmp_name,
    _write_parquet,
    column_kind,
    conform,
    fsync_dir,
    manifest_text,
)
from helpdp.contract import fail as _fail
from helpdp.jsonvalue import JSON

# column -> kind the loader checks ("int", "bool", "str", "float"), from the contract's
# Arrow schemas (helpdp/contract.py): any integer width is accepted, its values checked
STATES_SCHEMA, TRANSITIONS_SCHEMA, SCORES_SCHEMA = (
    {f.name: column_kind(f.type) for f in SCHEMAS[name]}
    for name in ("states", "transitions", "scores")
)
_INT_RANGE = {
    ("states.parquet", "depth"): (0, 2**31 - 1),
    ("transitions.parquet", "action"): (0, 127),
    ("scores.parquet", "action"): (0, 127),
}


@dataclass(frozen=True)
class MDP:
    """The compiled transition model (internal state indices 0..n-1).

    ``order`` is a processing order for the backward sweep: reverse topological
    when ``acyclic`` (one sweep is exact), else plain reverse index order. When
    acyclic, states are numbered connected component (task) by component, each
    component contiguous (``comp_ptr``) and numbered level by level (longest
    distance from a start), breadth-first within a level; ``order`` lists the
    states level by level, deepest first, and ``block_ptr`` delimits the levels
    in it for the level-parallel pass.
    ``start_weight[s]`` is the number of observed episodes starting at ``s``.
    """

    # int32 (int64 past 2^31 - 1 rows) (n + 1,): rows of state s are sa_ptr[s]:sa_ptr[s+1]
    sa_ptr: np.ndarray
    sa_action: np.ndarray  # int8 (n_rows,): action of each row, ascending within a state
    sa_count: np.ndarray  # int64 (n_rows,): episodes that took the row's action there
    # int32 (int64 past 2^31 - 1 transitions) (n_rows + 1,): transitions of row j are
    # tr_ptr[j]:tr_ptr[j+1]
    tr_ptr: np.ndarray
    tr_next: np.ndarray  # int32 (n_tr,): successor index
    tr_prob: np.ndarray  # float64 (n_tr,): count / row count
    terminal: np.ndarray  # bool (n,)
    success: np.ndarray  # bool (n,)
    start_weight: np.ndarray  # float64 (n,)
    order: np.ndarray  # int32 (n,)
    block_ptr: np.ndarray  # int64: order[block_ptr[b]:block_ptr[b+1]] is one level (acyclic)
    acyclic: bool
    n_actions: int  # 1 + number of interventions
    # int64 (n_comp + 1,) or None: states comp_ptr[c]:comp_ptr[c+1] form connected
    # component c (a task), numbered topologically inside; None when not laid out so
    comp_ptr: np.ndarray | None = None
    # per-MDP caches of helpdp.solve / helpdp.budget (chunk plans, traced frontiers)
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def n_states(self) -> int:
        return self.terminal.shape[0]

    @property
    def n_rows(self) -> int:
        return self.sa_action.shape[0]

    @property
    def n_transitions(self) -> int:
        return self.tr_next.shape[0]

    @property
    def graph(self) -> Graph:
        """The arrays a pass reads, as the kernels take them (``bundles.Graph``)."""
        return Graph(
            self.sa_ptr,
            self.sa_action,
            self.tr_ptr,
            self.tr_next,
            self.tr_prob,
            self.terminal,
            self.success,
        )

    @property
    def nbytes(self) -> int:
        """Bytes one backward sweep reads from the model arrays (the per-task and
        serial passes of an MDP laid out by task read no order array)."""
        arrays = tuple(self.graph)
        if self.comp_ptr is None:
            arrays += (self.order,)
        return int(sum(a.nbytes for a in arrays))


@dataclass(frozen=True)
class Dataset:
    """A validated dataset directory. DataFrames are as read (file row order)."""

    path: Path | None
    manifest: dict
    states: pd.DataFrame
    transitions: pd.DataFrame
    scores: pd.DataFrame | None
    mdp: MDP
    state_ids: np.ndarray  # int64 (n,): internal index -> state_id
    episodes: pd.DataFrame | None = None
    steps: pd.DataFrame | None = None
    _id_sorted: np.ndarray = field(default=None, repr=False)
    _id_perm: np.ndarray = field(default=None, repr=False)

    @property
    def actions(self) -> list[str]:
        return list(self.manifest["actions"])

    @property
    def gamma(self) -> float:
        return float(self.manifest["gamma"])

    def index(self, state_ids) -> np.ndarray:
        """Internal indices of ``state_ids``; raises KeyError on an unknown id."""
        if self._id_sorted is None:  # sorted on first use (the loader needs no sort)
            perm = pertask.radix_argsort(self.state_ids)
            object.__setattr__(self, "_id_sorted", self.state_ids[perm])
            object.__setattr__(self, "_id_perm", perm)
        ids = np.asarray(state_ids, dtype=np.int64)
        pos = np.searchsorted(self._id_sorted, ids)
        pos = np.minimum(pos, len(self._id_sorted) - 1)
        bad = self._id_sorted[pos] != ids
        if bad.any():
            raise KeyError(f"unknown state_id {int(ids[np.argmax(bad)])}")
        return self._id_perm[pos]


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _read_table(path: Path, name: str, schema: dict[str, str]) -> pd.DataFrame:
    file = path / name
    if not file.exists():
        _fail(name, None, None, f"missing file (expected at {file})")
    try:
        table = pq.read_table(file)
    except (pa.ArrowInvalid, OSError) as e:
        _fail(name, None, None, f"not a readable Parquet file ({e})")
    cols = {}
    for col, kind in schema.items():
        if col not in table.column_names:
            _fail(name, col, None, f"missing column (has {table.column_names})")
        arr = table.column(col)
        t = arr.type
        ok = {
            "int": pa.types.is_integer(t),
            "bool": pa.types.is_boolean(t),
            "str": pa.types.is_string(t) or pa.types.is_large_string(t),
            "float": pa.types.is_floating(t),
        }[kind]
        if not ok and not (kind == "str" and pa.types.is_null(t) and len(arr) == 0):
            _fail(name, col, None, f"has type {t}, expected {kind}")
        if arr.null_count:
            nulls = arr.is_null().to_numpy(zero_copy_only=False)
            _fail(name, col, _first(nulls), "is null")
        if kind == "int":
            np_arr = arr.to_numpy()
            lo, hi = _INT_RANGE.get((name, col), (-(2**63), 2**63 - 1))
            info = np.iinfo(np_arr.dtype)
            # the mask only where the type's range exceeds [lo, hi] and a value may be out
            if (info.min < lo or info.max > hi) and len(np_arr):
                if np_arr.min() < lo or np_arr.max() > hi:
                    out = (np_arr < lo) | (np_arr > hi)
                    r = _first(out)
                    _fail(name, col, r, f"value {np_arr[r]} outside [{lo}, {hi}]")
            cols[col] = np_arr  # the file's own integer width; compiled as int64
        elif kind in ("bool", "float"):
            cols[col] = arr.to_numpy(zero_copy_only=False)
        else:
            cols[col] = arr.to_pandas()
    for col in table.column_names:  # keep extra columns (e.g. split, text metadata)
        if col not in cols:
            cols[col] = table.column(col).to_pandas()
    return pd.DataFrame(cols, copy=False)  # the columns as read: no copy into blocks


def _read_manifest(path: Path) -> dict:
    file = path / MANIFEST_FILE
    if not file.exists():
        _fail("manifest.json", None, None, f"missing file (expected at {file})")
    try:
        manifest = json.loads(file.read_text())
    except json.JSONDecodeError as e:
        _fail("manifest.json", None, None, f"invalid JSON ({e})")
    if not isinstance(manifest, dict):
        _fail("manifest.json", None, None, "must be a JSON object")
    actions = manifest.get("actions")
    if (
        not isinstance(actions, list)
        or len(actions) < 2
        or not all(isinstance(a, str) and a for a in actions)
        or len(set(actions)) != len(actions)
    ):
        _fail("manifest.json", "actions", None, f"must list >= 2 distinct names, got {actions!r}")
    if actions[0] != "nohelp":
        _fail("manifest.json", "actions", None, f"actions[0] must be 'nohelp', got {actions[0]!r}")
    gamma = manifest.get("gamma")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 < gamma <= 1:
        _fail("manifest.json", "gamma", None, f"must be a number in (0, 1], got {gamma!r}")
    if manifest.get("format") != FORMAT_VERSION:
        _fail(
            "manifest.json",
            "format",
            None,
            f"unsupported format {manifest.get('format')!r} (expected {FORMAT_VERSION})",
        )
    return manifest


def load_dataset(path: str | Path, *, gamma: float | None = None) -> Dataset:
    """Load and validate the dataset directory at ``path``.

    ``gamma`` overrides the manifest's discount (validated the same way).
    """
    path = Path(path)
    if not path.is_dir():
        raise DatasetError(f"{path}: not a dataset directory")
    prefetch = _prefetch_kernels()
    manifest = _read_manifest(path)
    if gamma is not None:
        if not 0 < gamma <= 1:
            raise DatasetError(f"gamma override must be in (0, 1], got {gamma}")
        manifest = {**manifest, "gamma": float(gamma)}
    states = _read_table(path, "states.parquet", STATES_SCHEMA)
    transitions = _read_table(path, "transitions.parquet", TRANSITIONS_SCHEMA)
    scores = None
    if (path / "scores.parquet").exists():
        scores = _read_table(path, "scores.parquet", SCORES_SCHEMA)
    episodes = (
        pd.read_parquet(path / "episodes.parquet") if (path / "episodes.parquet").exists() else None
    )
    steps = pd.read_parquet(path / "steps.parquet") if (path / "steps.parquet").exists() else None
    ds = from_frames(
        manifest, states, transitions, scores, path=path, episodes=episodes, steps=steps
    )
    prefetch.join()  # no thread outlives the load (a caller may fork next)
    return ds


_PREFETCH = threading.Lock()
_prefetched: list[threading.Thread] = []


def _prefetch_kernels() -> threading.Thread:
    """Load the loader's numba kernels (from numba's cache, or compile them) in a
    thread, on a two-task dataset of five states, while the caller reads the Parquet
    files (pyarrow and llvmlite release the GIL): a process's first load no longer
    waits for them after its read (measured at 10^7 transitions: see
    docs/results/benchmarks.md). Started once per process; returns the thread."""
    with _PREFETCH:
        if not _prefetched:
            t = threading.Thread(target=_tiny_load, name="helpdp-prefetch", daemon=True)
            t.start()
            _prefetched.append(t)
        return _prefetched[0]


def _tiny_load() -> Dataset:
    states = pd.DataFrame(
        {
            "state_id": np.array([10, 11, 12, 20, 21], np.int64),
            "task_id": ["a", "a", "a", "b", "b"],
            "depth": np.array([0, 1, 1, 0, 1], np.int32),
            "is_start": [True, False, False, True, False],
            "terminal": [False, True, True, False, True],
            "success": [False, True, False, False, True],
            "text": [""] * 5,
        }
    )
    transitions = pd.DataFrame(
        {
            "state_id": np.array([10, 10, 10, 20], np.int64),
            "action": np.array([0, 0, 1, 1], np.int8),
            "next_state_id": np.array([11, 12, 11, 21], np.int64),
            "count": np.array([1, 2, 3, 1], np.int64),
        }
    )
    manifest = {"actions": ["nohelp", "help"], "gamma": 1.0, "format": FORMAT_VERSION}
    return from_frames(manifest, states, transitions)


def from_frames(
    manifest: dict,
    states: pd.DataFrame,
    transitions: pd.DataFrame,
    scores: pd.DataFrame | None = None,
    *,
    path: Path | None = None,
    episodes: pd.DataFrame | None = None,
    steps: pd.DataFrame | None = None,
) -> Dataset:
    """Validate in-memory tables (already of the right column kinds) and compile them."""
    n_actions = len(manifest["actions"])
    sid = states["state_id"].to_numpy(np.int64)
    n = sid.shape[0]
    if n == 0:
        _fail("states.parquet", None, None, "has no rows")
    # state_id -> row of states.parquet: one hash table, filled and probed in file order
    table = np.zeros((pertask.id_table_rows(n), 2), np.int64)
    r = pertask.id_table(sid, table)
    if r >= 0:
        _fail("states.parquet", "state_id", r, f"duplicate state_id {sid[r]}")
    terminal = states["terminal"].to_numpy(bool)
    success = states["success"].to_numpy(bool)
    bad = success & ~terminal
    if bad.any():
        _fail("states.parquet", "success", _first(bad), "success is true on a non-terminal state")
    is_start = states["is_start"].to_numpy(bool)
    if not is_start.any():
        _fail("states.parquet", "is_start", None, "no start state (is_start is false on every row)")

    def lookup(file, col, ids, found=None):
        out, missing = found if found is not None else _lookup(table, ids)
        if missing >= 0:
            _fail(file, col, missing, f"unknown state_id {ids[missing]} (not in states.parquet)")
        return out

    src_id = transitions["state_id"].to_numpy(np.int64)
    dst_id = transitions["next_state_id"].to_numpy(np.int64)
    act = transitions["action"].to_numpy(np.int64)
    cnt = transitions["count"].to_numpy(np.int64)
    if len(cnt) == 0:
        _fail("transitions.parquet", None, None, "has no rows")
    if cnt.min() <= 0:
        r = _first(cnt <= 0)
        _fail("transitions.parquet", "count", r, f"count {cnt[r]} is not positive")
    if act.max() >= n_actions:
        r = _first(act >= n_actions)
        _fail(
            "transitions.parquet",
            "action",
            r,
            f"action {act[r]} but manifest.json names {n_actions} actions",
        )
    # both columns' lookups side by side (the kernel releases the GIL), then checked
    # in order
    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(lambda ids: _lookup(table, ids), (src_id, dst_id)))
    src = lookup("transitions.parquet", "state_id", src_id, found[0])
    dst = lookup("transitions.parquet", "next_state_id", dst_id, found[1])
    bad = terminal[src]
    if bad.any():
        r = _first(bad)
        _fail(
            "transitions.parquet",
            "state_id",
            r,
            f"terminal state {src_id[r]} has an outgoing transition",
        )

    if n * n * n_actions >= 2**63:
        _fail("states.parquet", None, None, f"{n} states is more than one sort key can index")
    # (state, action, next) order: a radix sort on (state, action), skipped when the
    # file is already in that order (as the collector writes it), each row by next
    dup, csr, visits = _group(src, act, dst, cnt, n, n_actions)
    if dup:
        r = _first_repeat(src_id, act, dst_id)
        _fail(
            "transitions.parquet",
            "next_state_id",
            r,
            f"duplicate (state_id, action, next_state_id) = ({src_id[r]}, {act[r]}, {dst_id[r]})",
        )
    del src, dst
    # episodes through each state
    start_weight = np.where(is_start, visits, 0.0)
    if start_weight.sum() <= 0:
        _fail("transitions.parquet", None, None, "no start state has an outgoing transition")
    if scores is not None:
        _check_scores(scores, n_actions, lambda ids: lookup("scores.parquet", "state_id", ids))
    table = None  # (hundreds of MB at 10^7 ids) freed before the layout
    mdp, new_of_old = _compile(csr, n_actions, terminal, success, start_weight)
    state_ids = np.empty(n, np.int64)
    state_ids[new_of_old] = sid
    return Dataset(
        path=path,
        manifest=manifest,
        states=states,
        transitions=transitions,
        scores=scores,
        mdp=mdp,
        state_ids=state_ids,
        episodes=episodes,
        steps=steps,
    )


def _lookup(table, ids):
    """``pertask.id_lookup``: (rows, first absent row or -1)."""
    out = np.empty(len(ids), np.int64)
    return out, pertask.id_lookup(table, ids, out)


def _group(src, act, dst, cnt, n, n_actions):
    """The CSR arrays of the transitions (``pertask.fill_rows``): rows of a state
    by action, transitions of a row by next state. The first value says whether a
    (state, action, next state) repeats. ``dst`` serves as scratch."""
    m = len(src)
    a_bits = max(int(n_actions - 1).bit_length(), 1)
    key = np.empty(m, np.int64)
    in_order = pertask.row_keys(src, act, dst, a_bits, key)
    if in_order:
        nxt, c_s = dst, (cnt if cnt.flags.writeable else cnt.copy())
    else:
        c_in = cnt if cnt.flags.writeable else cnt.copy()  # scratch of the sort
        key, nxt, c_s = pertask.radix_sort_pairs(
            key, dst, c_in, np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int64)
        )
    n_rows = pertask.count_rows(key)
    rows = Rows(
        sa_ptr=np.zeros(n + 1, index_dtype(n_rows)),
        row_action=np.empty(n_rows, np.int8),
        row_count=np.empty(n_rows, np.int64),
        tr_ptr=np.empty(n_rows + 1, index_dtype(m)),
        tr_prob=np.empty(m),
        visits=np.zeros(n),
    )
    dup = pertask.fill_rows(key, nxt, c_s, a_bits, not in_order, rows)
    csr = Csr(rows.sa_ptr, rows.row_action, rows.row_count, rows.tr_ptr, nxt, rows.tr_prob)
    return dup, csr, rows.visits


def _first_repeat(*cols) -> int:
    """The first row (file order) whose values in ``cols`` repeat an earlier row's."""
    order = np.lexsort(cols[::-1])  # stable
    same = np.ones(len(order) - 1, bool)
    for c in cols:
        same &= c[order][1:] == c[order][:-1]
    return int(order[1:][same].min())


def _check_scores(scores: pd.DataFrame, n_actions: int, lookup) -> None:
    act = scores["action"].to_numpy(np.int64)
    bad = act >= n_actions
    if bad.any():
        r = _first(bad)
        _fail(
            "scores.parquet",
            "action",
            r,
            f"action {act[r]} but manifest.json names {n_actions} actions",
        )
    p = scores["p_success"].to_numpy(np.float64)
    bad = ~((p >= 0) & (p <= 1))  # also catches NaN
    if bad.any():
        r = _first(bad)
        _fail("scores.parquet", "p_success", r, f"p_success {p[r]} outside [0, 1]")
    lookup(scores["state_id"].to_numpy(np.int64))


def _compile(csr: Csr, n_actions, terminal, success, start_weight):
    """Build the MDP from the grouped transitions ``csr`` (``tr_next`` int64, any
    pointer width); when the graph is acyclic, renumber states task by task
    (connected component by component), level by level within each, breadth-first
    within a level. Indices are stored in 32 bits where the sizes allow
    (``pertask.empty_csr``)."""
    n = terminal.shape[0]
    inv, order = np.empty(n, np.int64), np.empty(n, index_dtype(n))
    small = max(n, len(csr.tr_next)) < 2**31  # in-degrees, levels and labels fit int32
    node = np.zeros((n, 4), np.int32 if small else np.int64)
    work = np.empty((4, n), np.int64)
    acyclic, comp_ptr, block_ptr = pertask.task_layout(
        n, csr.sa_ptr, csr.tr_ptr, csr.tr_next, node, work, inv, order
    )
    del node, work
    if not acyclic:
        mdp = MDP(
            csr.sa_ptr,
            csr.sa_action,
            csr.sa_count,
            csr.tr_ptr,
            csr.tr_next.astype(np.int32),
            csr.tr_prob,
            terminal,
            success,
            start_weight,
            np.arange(n - 1, -1, -1, dtype=index_dtype(n)),
            np.array([0, n], np.int64),
            False,
            n_actions,
        )
        return mdp, np.arange(n)
    # components (tasks never connect), laid out contiguously; inside each, the
    # states level by level (longest distance from a start), breadth-first within
    # a level: a topological numbering, so every component is backed up by a
    # reverse sweep over its own index range (helpdp._src.pertask); ``order`` is
    # the level order of the level-parallel pass, deepest level first
    new_of_old = np.empty(n, np.int64)
    new = pertask.empty_csr(
        n, len(csr.sa_action), len(csr.tr_next), csr.sa_action.dtype, csr.sa_count.dtype
    )
    pertask.renumber_into(inv, csr, new, new_of_old)
    mdp = MDP(
        *new,
        terminal[inv],
        success[inv],
        start_weight[inv],
        order,
        block_ptr,
        True,
        n_actions,
        comp_ptr=comp_ptr,
    )
    return mdp, new_of_old


def write_dataset(
    path: str | Path,
    manifest: Mapping[str, JSON],
    tables: Mapping[str, pa.Table | pd.DataFrame | None],
    *,
    overwrite: bool = False,
    check: bool = True,
) -> Path:
    """Write a dataset directory at ``path``, atomically; returns ``path``.

    ``manifest``: a dict as :func:`build_manifest` makes (``format`` must be
    :data:`FORMAT_VERSION`). ``tables``: table name (``states``, ``transitions``,
    optional ``scores``, ``episodes``, ``steps``) -> Arrow table or DataFrame, each
    passed through :func:`conform`.

    The files are written into a temporary directory beside ``path``; with ``check``
    that directory is loaded by :func:`helpdp.data.load_dataset` (a writer bug raises
    the loader's :class:`DatasetError` here and nothing is replaced); then it is
    renamed to ``path``. An existing non-empty ``path`` is refused
    (``FileExistsError``) unless ``overwrite``; then its dataset files
    (:data:`DATASET_FILES`) are replaced as a unit and every other entry in it (e.g. a
    collector's ``shards/``) is carried over. On any failure the temporary
    directory is removed and ``path`` is left as it was.
    """
    path = Path(path)
    unknown = sorted(set(tables) - set(SCHEMAS))
    if unknown:
        raise ValueError(f"unknown dataset table {unknown[0]!r} (known: {list(SCHEMAS)})")
    for name in REQUIRED_TABLES:
        if tables.get(name) is None:
            _fail(f"{name}.parquet", None, None, "missing table (required)")
    if manifest.get("format") != FORMAT_VERSION:
        _fail(
            MANIFEST_FILE,
            "format",
            None,
            f"must be {FORMAT_VERSION}, got {manifest.get('format')!r}",
        )
    exists = path.exists()
    if exists and not path.is_dir():
        raise FileExistsError(f"{path}: exists and is not a directory")
    if exists and any(path.iterdir()) and not overwrite:
        raise FileExistsError(f"{path}: not empty (pass overwrite=True to replace its dataset)")
    arrow = {name: conform(name, t) for name, t in tables.items() if t is not None}
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep(path)
    tmp = _tmp_name(path, "tmp")
    tmp.mkdir()
    try:
        for name, table in arrow.items():
            _write_parquet(table, tmp / f"{name}.parquet")
        with open(tmp / MANIFEST_FILE, "w", encoding="utf-8") as fh:
            fh.write(manifest_text(manifest))
            fh.flush()
            os.fsync(fh.fileno())
        fsync_dir(tmp)
        if check:
            load_dataset(tmp)
        _publish(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    fsync_dir(path.parent)
    return path


def _publish(tmp: Path, path: Path) -> None:
    """Rename the complete directory ``tmp`` to ``path``, carrying over the entries of
    an existing ``path`` that are not dataset files."""
    if not path.exists():
        os.rename(tmp, path)
        return
    if not any(path.iterdir()):
        os.rename(tmp, path)  # rename(2) replaces an empty directory
        return
    old = _tmp_name(path, "old")
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except OSError:
        os.rename(old, path)  # put the old dataset back
        raise
    # the new dataset is in place; the old one's other entries move in beside it. A
    # crash here leaves them in .NAME.old-*, beside the target (never deleted)
    for entry in sorted(old.iterdir()):
        if entry.name not in DATASET_FILES:
            os.rename(entry, path / entry.name)
    shutil.rmtree(old)
