"""The embedded demo dataset is what `make demo-data` collects, byte for byte."""

import json

import pandas as pd
import pytest

from helpdp import demo_dataset_path, load_dataset
from helpdp.demo import DEMO_COMMAND


def test_demo_is_collected_from_the_demo_worlds():
    ds = load_dataset(demo_dataset_path())
    src = ds.manifest["source"]
    assert (
        ds.actions == ["nohelp", "oracle"]
        and src["actor"] == "simulated"
        and src["state_key"] == "db"
    )
    e = ds.episodes
    assert len(e) == 630 and e["task_id"].nunique() == 30
    assert sorted(e["trigger_p"].unique()) == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    # a weak agent that help rescues: success rises with the trigger probability
    rate = e.groupby("trigger_p")["success"].mean()
    assert rate.loc[1.0] > rate.loc[0.0] + 0.3


@pytest.mark.slow
def test_demo_regenerates_byte_identically(tmp_path):
    from collect.collector import collect_demo

    args = DEMO_COMMAND.split()[3:]  # the overrides after `python -m collect`
    overrides = [a for a in args if not a.startswith("out=")]
    collect_demo(tmp_path / "demo", overrides)
    shipped = demo_dataset_path()
    m_new = json.loads((tmp_path / "demo" / "manifest.json").read_text())
    m_old = json.loads((shipped / "manifest.json").read_text())
    # Parquet bytes depend on the writer's version: byte-identical when the libraries
    # are the ones the shipped copy was written with, identical tables in any case
    same_writer = m_new["source"]["versions"] == m_old["source"]["versions"]
    for name in ["states", "transitions", "episodes", "steps"]:
        new, old = tmp_path / "demo" / f"{name}.parquet", shipped / f"{name}.parquet"
        pd.testing.assert_frame_equal(pd.read_parquet(new), pd.read_parquet(old))
        if same_writer:
            assert new.read_bytes() == old.read_bytes(), name
    for m in (m_new, m_old):
        m["source"].pop("git_sha", None)  # provenance: the commit it was generated from
        m["source"].pop("versions", None)
        # what confined the run is the host's (bubblewrap or not, cgroup v1/v2 or none)
        m["source"].pop("isolation", None)
    assert m_new == m_old
