"""Collections of disjoint tasks merge into one dataset (``collect.merge``):
the demo cut in two by scenario and merged again is the demo, for the DP too."""

import json

import numpy as np
import pytest

from collect.merge import MergeConfig, merge_collections, run_merge
from helpdp import demo_dataset_path, load_dataset, search_budget
from helpdp.data import DatasetError, write_dataset
from helpdp.subset import task_subset


def _halves(tmp_path, edit=None):
    ds = load_dataset(demo_dataset_path())
    tasks = sorted(ds.states["task_id"].unique())
    a = [t for t in tasks if t.startswith("e_commerce")]
    b = [t for t in tasks if t not in a]
    out = []
    for name, part in (("part-a", a), ("part-b", b)):
        sub = task_subset(ds, part)
        man = json.loads(json.dumps(ds.manifest))
        if name == "part-b":
            man["source"]["config"]["schedule"]["tasks"] = [3]  # a later run, other tasks
            if edit:
                edit(man)
        tables = {"states": sub.states, "transitions": sub.transitions,
                  "episodes": sub.episodes, "steps": sub.steps}  # fmt: skip
        out.append(write_dataset(tmp_path / name, man, tables))
    return ds, out


def test_the_demo_cut_in_two_merges_back_into_the_demo(tmp_path, capsys):
    demo, (a, b) = _halves(tmp_path)
    out = run_merge(MergeConfig(sources=[str(a), str(b)], out=str(tmp_path / "merged")))
    assert "30 tasks, 630 episodes" in capsys.readouterr().out
    m = load_dataset(out)
    for table, key in (("states", ["state_id"]), ("transitions", ["state_id", "action",
                       "next_state_id"]), ("episodes", ["episode_id"])):  # fmt: skip
        got = getattr(m, table).sort_values(key).reset_index(drop=True)
        ref = getattr(demo, table).sort_values(key).reset_index(drop=True)
        assert got.equals(ref[got.columns]), table
    r0, r1 = (
        search_budget(demo.mdp, 1.0, gamma=demo.gamma),
        search_budget(m.mdp, 1.0, gamma=m.gamma),
    )
    assert r1.r == pytest.approx(r0.r, abs=1e-12)
    assert r1.policy.expected_success == pytest.approx(r0.policy.expected_success, abs=1e-12)
    src = m.manifest["source"]
    assert [e["name"] for e in src["merged_from"]] == ["part-a", "part-b"]
    assert [e["episodes"] for e in src["merged_from"]] == [210, 420]
    assert src["merged_from"][0]["tasks"][0] == "e_commerce_admin_1/0"
    # the demo's schedule took every task (null); a source that did keeps the union null
    assert src["config"]["schedule"]["tasks"] is None
    assert src["summary"]["episodes"] == 630 == demo.manifest["source"]["summary"]["episodes"]
    assert src["summary"]["success_rate"] == pytest.approx(
        demo.manifest["source"]["summary"]["success_rate"], abs=1e-12
    )
    assert np.isclose(m.episodes["success"].mean(), demo.episodes["success"].mean())


def test_a_task_in_two_sources_and_another_experiment_are_refused(tmp_path):
    _, (a, b) = _halves(tmp_path)
    with pytest.raises(
        DatasetError,
        match=r"part-a/states.parquet: task_id 'e_commerce_admin_1/\d' is also in part-a",
    ):
        merge_collections([a, a], tmp_path / "twice")
    assert not (tmp_path / "twice").exists()

    def hotter(man):
        man["source"]["config"]["actor"]["temperature"] = 1.3

    _, (a2, b2) = _halves(tmp_path / "other", edit=hotter)
    with pytest.raises(DatasetError, match=r"part-b/manifest.json: .* actor.temperature"):
        merge_collections([a2, b2], tmp_path / "hot")
    with pytest.raises(ValueError, match="at least two"):
        merge_collections([a], tmp_path / "one")
