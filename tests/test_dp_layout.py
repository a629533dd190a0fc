"""The compact layout: 32-bit pointers and order where the sizes allow, 64-bit past
2^31 - 1, states past 2^31 - 1 refused; the numbers do not depend on the width."""

import dataclasses

import numpy as np
import pytest
from pertask_helpers import random_tasks

from helpdp import solve
from helpdp._src import pertask
from helpdp._src.bundles import index_dtype
from helpdp.data import from_frames


def test_index_width_falls_back_to_64_bits_past_2_31():
    assert index_dtype(0) == np.int32 and index_dtype(2**31 - 1) == np.int32
    assert index_dtype(2**31) == np.int64
    csr = pertask.empty_csr(5, 7, 9, np.int8, np.int64)
    assert csr.sa_ptr.dtype == csr.tr_ptr.dtype == csr.tr_next.dtype == np.int32
    assert csr.tr_prob.dtype == np.float64 and csr.sa_ptr.shape == (6,)
    with pytest.raises(ValueError, match=r"2147483648 states: at most 2\^31 - 1"):
        pertask.empty_csr(2**31, 1, 1, np.int8, np.int64)


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_compact_and_64_bit_layouts_solve_alike(gamma):
    m = from_frames(*random_tasks(5, n_tasks=8, gamma=gamma)).mdp
    assert m.sa_ptr.dtype == m.tr_ptr.dtype == m.order.dtype == np.int32
    wide = dataclasses.replace(
        m,
        sa_ptr=m.sa_ptr.astype(np.int64),
        tr_ptr=m.tr_ptr.astype(np.int64),
        order=m.order.astype(np.int64),
        cache={},
    )
    # a pass over the task layout reads no order array: the model's bytes are the
    # CSR arrays' (4 bytes per pointer) and the two flags
    n, rows, tr = m.n_states, m.n_rows, m.n_transitions
    assert m.nbytes == 4 * (n + 1) + rows + 4 * (rows + 1) + 4 * tr + 8 * tr + 2 * n
    assert wide.nbytes == m.nbytes + 4 * (n + 1) + 4 * (rows + 1)
    for r in (0.0, 0.05, 0.3):
        for path in ("serial", "tasks", "levels"):
            a = solve(m, r, gamma=gamma, parallel=path)
            b = solve(wide, r, gamma=gamma, parallel=path)
            assert np.array_equal(a.values, b.values) and np.array_equal(a.action, b.action)
            assert a.expected_success == b.expected_success
