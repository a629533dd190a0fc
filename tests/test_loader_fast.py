"""The loader's kernel prefetch (``helpdp.data._prefetch_kernels``)."""

import numpy as np
import pytest


def test_the_kernel_prefetch_loads_a_tiny_dataset_and_no_thread_outlives_a_load():
    import threading

    from helpdp.data import _prefetch_kernels, _tiny_load, load_dataset
    from helpdp.demo import demo_dataset_path

    ds = _tiny_load()
    m = ds.mdp
    assert m.n_states == 5 and m.acyclic and m.comp_ptr.tolist() == [0, 3, 5]
    # state 10's nohelp row: 1 x -> 11, 2 x -> 12
    row = m.sa_ptr[int(np.flatnonzero(m.start_weight)[0])]
    probs = sorted(m.tr_prob[m.tr_ptr[row] : m.tr_ptr[row + 1]].tolist())
    assert probs == pytest.approx([1 / 3, 2 / 3])
    load_dataset(demo_dataset_path())
    assert not _prefetch_kernels().is_alive()
    assert not any(t.name == "helpdp-prefetch" for t in threading.enumerate())
