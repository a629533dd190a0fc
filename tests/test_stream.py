"""Frontiers of datasets partitioned by task: streamed part by part, and on Ray."""

import numpy as np
import pytest

from helpdp import DatasetError, from_frames, generate_synthetic, search_budget
from helpdp.stream import answer, trace_parts, write_parts
from helpdp.synthetic import SyntheticParams
from helpdp.trace import frontier_of


@pytest.fixture(scope="module")
def parted(tmp_path_factory):
    ds = from_frames(*generate_synthetic(SyntheticParams(n_tasks=10, episodes_per_seed=3))[:3])
    out = tmp_path_factory.mktemp("parts")
    paths = write_parts(ds, out, tasks_per_part=3)
    return ds, out, paths


def _same(fr, ref):
    assert np.array_equal(fr.starts, ref.starts)
    assert fr.usage == pytest.approx(ref.usage, abs=1e-12)
    assert fr.success == pytest.approx(ref.success, abs=1e-12)


def test_streamed_parts_merge_to_the_whole_frontier(parted):
    ds, out, paths = parted
    assert len(paths) == 4
    res = trace_parts(out, memory_bound=2**30)
    ref = frontier_of(ds.mdp, gamma=ds.gamma)
    assert res.parts == 4 and res.transitions == ds.mdp.n_transitions
    assert res.frontier.n_tasks == 10 and len(res.frontier) == len(ref) > 20
    _same(res.frontier, ref)
    assert res.peak_rss_bytes > 0
    # budgets answered from the streamed frontier agree with a search on the whole
    for b in [0.3, 1.0, 2.0]:
        js = answer(res.frontier, b)
        full = search_budget(ds.mdp, b, gamma=ds.gamma, method="solves")
        assert js["expected_success"] == pytest.approx(full.expected_success, abs=1e-9)
        assert js["expected_usage"] == pytest.approx(full.expected_usage, abs=1e-9)
        assert (js["mixture"] is None) == (full.more_help is None)


def test_memory_bound_and_inconsistent_parts_are_refused(parted, tmp_path):
    _, out, paths = parted
    with pytest.raises(
        DatasetError, match=r"part-00000: needs about .* more than the memory bound"
    ):
        trace_parts(out, memory_bound=1000)
    import json
    import shutil

    bad = tmp_path / "bad"
    for p in paths[:2]:
        shutil.copytree(p, bad / p.name)
    m = json.loads((bad / "part-00001" / "manifest.json").read_text())
    m["gamma"] = 0.5
    (bad / "part-00001" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(DatasetError, match="part-00001/manifest.json: field 'gamma'"):
        trace_parts(bad)
    with pytest.raises(DatasetError, match="no part"):
        trace_parts(tmp_path / "bad" / "part-00000")


def test_ray_workers_trace_the_parts(parted):
    ray = pytest.importorskip("ray")
    ds, out, _ = parted
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        res = trace_parts(out, engine="ray")
    finally:
        ray.shutdown()
    assert res.engine == "ray" and res.parts == 4
    _same(res.frontier, frontier_of(ds.mdp, gamma=ds.gamma))
