"""The named bundles of arrays the kernels take (``typing.NamedTuple``: numba passes
them as one argument and reads their fields by name, at no cost in the loops).

A kernel's signature is a few of these plus the scalars of its own job, so that a
caller hands over the model as one ``Graph`` instead of slicing a tuple of arrays
by position. Every bundle holds plain arrays (no pandas, no config); the thin
wrappers in ``helpdp.solve``, ``helpdp.data``, ``helpdp.trace`` build them and check
their dtypes and shapes.
"""

from typing import NamedTuple

import numpy as np


class Graph(NamedTuple):
    """The compiled transition model a pass reads (``helpdp.data.MDP``): state ``s``
    owns rows ``sa_ptr[s]:sa_ptr[s + 1]``, row ``j`` owns transitions
    ``tr_ptr[j]:tr_ptr[j + 1]``. Pointers are int32 when the sizes allow (int64
    past 2^31 - 1 rows or transitions), ``tr_next`` int32, ``tr_prob`` float64."""

    sa_ptr: np.ndarray  # (n + 1,) int32 / int64
    sa_action: np.ndarray  # (n_rows,) int8, ascending within a state
    tr_ptr: np.ndarray  # (n_rows + 1,) int32 / int64
    tr_next: np.ndarray  # (n_tr,) int32
    tr_prob: np.ndarray  # (n_tr,) float64
    terminal: np.ndarray  # (n,) bool
    success: np.ndarray  # (n,) bool


class Backup(NamedTuple):
    """How a fixed-cost backup scores and picks a row (``kernels.sweep``)."""

    p_row: np.ndarray  # (n_rows,) float64 PRM estimates (rule paper; else empty)
    costs: np.ndarray  # (1 + K,) float64, costs[0] == 0
    gamma: float
    rule: int  # kernels.RULE_EXACT or kernels.RULE_PAPER
    tie_tol: float
    dm_tol: float


class Values(NamedTuple):
    """What a pass writes: values per state and the chosen action (int8, -1: none).
    ``kernels``: ``val`` (n, 2 + K), ``action`` (n,); ``parametric.sweep_costs``: one
    of each per help cost, (K, n, 3) and (K, n) (n = 0: nothing written)."""

    val: np.ndarray
    action: np.ndarray


class Chunks(NamedTuple):
    """Chunks of whole tasks for ``pertask.backward_chunks``: chunk ``c`` holds states
    ``lo[c]:hi[c]``; ``sched`` lists the chunks in the order they are handed out."""

    lo: np.ndarray  # int64
    hi: np.ndarray  # int64
    sched: np.ndarray  # int64


class Csr(NamedTuple):
    """The loader's CSR arrays with the row counts (``pertask.renumber_into``)."""

    sa_ptr: np.ndarray
    sa_action: np.ndarray
    sa_count: np.ndarray
    tr_ptr: np.ndarray
    tr_next: np.ndarray
    tr_prob: np.ndarray


class Rows(NamedTuple):
    """What ``pertask.fill_rows`` fills: the CSR arrays and each state's visits."""

    sa_ptr: np.ndarray  # zeros (n + 1,)
    row_action: np.ndarray  # (n_rows,) int8
    row_count: np.ndarray  # (n_rows,) int64
    tr_ptr: np.ndarray  # (n_rows + 1,)
    tr_prob: np.ndarray  # (n_tr,) float64
    visits: np.ndarray  # zeros (n,) float64


class Pieces(NamedTuple):
    """Piece lists of ``parametric``: piece ``i`` starts at help cost ``b[i]`` and
    carries the success ``s[i]`` and usage ``u[i]`` of the policy optimal there."""

    b: np.ndarray
    s: np.ndarray
    u: np.ndarray


class Sources(NamedTuple):
    """The successors a merge of ``parametric`` sums: successor ``k`` has the pieces
    ``lo[k]:hi[k]`` and weight ``coef[k]``; ``cur`` is scratch of the same length."""

    lo: np.ndarray
    hi: np.ndarray
    coef: np.ndarray
    cur: np.ndarray


def index_dtype(largest: int):
    """int32 when every index up to ``largest`` fits, else int64."""
    return np.int32 if largest < 2**31 else np.int64
