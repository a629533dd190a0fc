"""What a source proves before ``collect.merge`` lets its rows join another source's
tasks, and what the merge does with scores.

A stage-2 collection may share tasks with the grid (docs/collect.md, "Stage 2"), so a
manifest that claims ``stage2`` is checked against the tables: the design of every
episode, the episode ids its schedule gives, the steps' ``p_help`` and actions under
the design (the base policy where it is not randomised), the transitions and states
its steps give, the split of each shared task. The shipped real stage-2 collection
(``helpdp/data/real-actor-stage2-partial``) merges with the shipped grid as before;
each forged part of a crafted one is refused by file, row and field.

Scores (``scores.parquet``, a PRM's) are derived data: the README's merge of a scored
``DATA`` with ``S2`` runs as written, writes no scores, tells the user to rescore
``BOTH`` and leaves every source's scores as they were."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from collect.merge import merge_collections
from helpdp import load_dataset
from helpdp.contract import SCORES_SCHEMA, conform, write_table
from helpdp.data import DatasetError

DATA = Path(__file__).resolve().parents[1] / "helpdp" / "data"
GRID, S2 = DATA / "real-actor", DATA / "real-actor-stage2-partial"
TABLES = ("states", "transitions", "episodes", "steps")
ROOT = Path(__file__).resolve().parents[1]


def _grid(path: Path) -> Path:
    """The shipped grid (transformers in process) as the same experiment as the shipped
    stage-2 collection (the same GGUF behind a llama.cpp server): its actor config."""
    shutil.copytree(GRID, path)
    man = json.loads((path / "manifest.json").read_text())
    s2 = json.loads((S2 / "manifest.json").read_text())
    man["source"]["config"]["actor"] = s2["source"]["config"]["actor"]
    (path / "manifest.json").write_text(json.dumps(man))
    return path


def _tables(path: Path) -> dict[str, pd.DataFrame]:
    ds = load_dataset(path)
    return {t: getattr(ds, t).copy() for t in TABLES}


def _write(path: Path, manifest: dict, tables: dict[str, pd.DataFrame]) -> Path:
    """Write a dataset as a hostile collection would: the files themselves."""
    path.mkdir(parents=True)
    for name, frame in tables.items():
        frame.to_parquet(path / f"{name}.parquet", index=False)
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def _counts(steps: pd.DataFrame) -> pd.DataFrame:
    keys = ["state_id", "action", "next_state_id"]
    out = steps.groupby(keys, as_index=False, sort=True).size().rename(columns={"size": "count"})
    return out.astype({"count": "int64", "action": "int8"})


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    return _grid(tmp_path_factory.mktemp("proofs") / "grid")


def test_the_shipped_stage2_collection_merges_with_the_grid_as_before(grid, tmp_path):
    """Its proofs hold: the merge is the two collections' rows, each state once, the
    transitions' counts those of every step (what the merge wrote before the proofs)."""
    out = merge_collections([grid, S2], tmp_path / "both")
    m, g, s = load_dataset(out), load_dataset(grid), load_dataset(S2)
    assert (len(m.episodes), m.states["task_id"].nunique()) == (649, 12)
    ep = pd.concat([g.episodes, s.episodes], ignore_index=True)
    got = m.episodes.sort_values("episode_id").reset_index(drop=True)
    want = ep.sort_values("episode_id").reset_index(drop=True)[got.columns]
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert m.episodes["design"].notna().sum() == 406
    steps = pd.concat([g.steps, s.steps], ignore_index=True)
    assert len(m.steps) == len(steps) == 2073
    tr = m.transitions.sort_values(["state_id", "action", "next_state_id"])
    want_tr = _counts(steps).reset_index(drop=True)
    pd.testing.assert_frame_equal(tr.reset_index(drop=True), want_tr, check_dtype=False)
    ids = pd.concat([g.states["state_id"], s.states["state_id"]]).unique()
    assert sorted(m.states["state_id"]) == sorted(ids)
    src = m.manifest["source"]
    assert [e["name"] for e in src["merged_from"]] == ["grid", S2.name]
    assert src["merged_from"][1]["stage2"]["base"] == "turn0"
    assert "stage2" not in src["config"]


def _issue_source(grid: Path, root: Path, claim: bool) -> Path:
    """The crafted source of the finding: three of the grid's episodes of one task, new
    ids, every one a failure, with (or without) the stage-2 claim of a real manifest."""
    t = _tables(grid)
    ep = t["episodes"][t["episodes"]["task_id"] == "smart_home_1/4"].head(3).copy()
    steps = t["steps"][t["steps"]["episode_id"].isin(ep["episode_id"])].copy()
    new = dict(zip(ep["episode_id"], ep["episode_id"] + 10_000_000))
    ep["episode_id"] = ep["episode_id"].map(new)
    ep["success"] = False
    steps["episode_id"] = steps["episode_id"].map(new)
    seen = set(steps["state_id"]) | set(steps["next_state_id"])
    states = t["states"][t["states"]["state_id"].isin(seen)].copy()
    man = json.loads((S2 / "manifest.json").read_text())
    if not claim:
        g = json.loads((grid / "manifest.json").read_text())
        del man["source"]["config"]["stage2"]
        man["source"]["config"]["schedule"] = g["source"]["config"]["schedule"]
    tables = {"states": states, "transitions": _counts(steps), "episodes": ep, "steps": steps}
    return _write(root / ("claims" if claim else "plain"), man, tables)


def _refused(sources: list[Path], out: Path, match: str) -> DatasetError:
    with pytest.raises(DatasetError, match=match) as err:
        merge_collections(sources, out)
    assert not out.exists()
    assert "np." not in str(err.value)  # numbers as plain numbers
    return err.value


def test_a_manifest_claiming_stage2_without_the_tables_is_refused(grid, tmp_path):
    """The finding: the claim alone let three failed episodes into the grid's task."""
    plain = _issue_source(grid, tmp_path, claim=False)
    _refused([grid, plain], tmp_path / "m1", r"^plain/states.parquet: task_id .* is also in grid")
    claims = _issue_source(grid, tmp_path, claim=True)
    _refused(
        [grid, claims],
        tmp_path / "m2",
        r"^claims/episodes.parquet: no column 'design': source.config.stage2 in its manifest",
    )


def _forged(root: Path, edit) -> Path:
    """The shipped stage-2 collection with one part changed by ``edit(tables, manifest)``."""
    t, man = _tables(S2), json.loads((S2 / "manifest.json").read_text())
    edit(t, man)
    return _write(root / "forged", man, t)


def _one_design_row(t, man):
    t["episodes"].loc[3, "design"] = t["episodes"].loc[3, "design"].replace('"q":0.5', '"q":0.9')


def _moved_episode(t, man):
    eid = t["episodes"].loc[0, "episode_id"]
    t["episodes"].loc[0, "episode_id"] = eid + 1
    t["steps"].loc[t["steps"]["episode_id"] == eid, "episode_id"] = eid + 1


def _no_p_help(t, man):
    t["steps"] = t["steps"].drop(columns=["p_help"])


def _p_help_changed(t, man):
    rows = t["steps"].index[t["steps"]["p_help"] == 0.5]
    t["steps"].loc[rows[0], "p_help"] = 0.25


def _not_the_base(t, man):
    """Help where the design does not randomise and its base (turn0) says no help."""
    st = t["steps"]
    r = st.index[(st["p_help"] == 0.0) & (st["action"] == 0)][0]
    st.loc[r, "action"] = 1
    t["transitions"] = _counts(st)


def _more_transitions(t, man):
    t["transitions"].loc[0, "count"] += 5


def _deeper_start(t, man):
    st = t["states"]
    r = st.index[st["is_start"]][0]
    st.loc[r, "is_start"] = False


def _other_split(t, man):
    ep = t["episodes"]
    ep.loc[ep["task_id"] == "smart_home_1/0", "split"] = "validation"


def _bad_q(t, man):
    man["source"]["config"]["stage2"]["q"] = 1.5


FORGERIES = {
    "design": (_one_design_row, r"^forged/episodes.parquet: row 3: design .* is not its manifest"),
    "episode_id": (_moved_episode, r"^forged/episodes.parquet: row 0: episode_id -?\d+ is not"),
    "no p_help": (_no_p_help, r"^forged/steps.parquet: no column 'p_help'"),
    "p_help": (_p_help_changed, r"^forged/steps.parquet: row \d+: p_help 0.25 does not match"),
    "base": (_not_the_base, r"^forged/steps.parquet: row \d+: action 1 has probability 0"),
    "transitions": (_more_transitions, r"^forged/transitions.parquet: row 0: .* counts? 6"),
    "is_start": (_deeper_start, r"^forged/states.parquet: row \d+: state_id -?\d+ is_start"),
    "split": (
        _other_split,
        r"^forged/episodes.parquet: row \d+: task 'smart_home_1/0' is in split",
    ),
    "stage2": (_bad_q, r"^forged/manifest.json: source.config.stage2: stage2.q must lie in"),
}


@pytest.mark.parametrize("part", list(FORGERIES))
def test_each_forged_part_of_a_stage2_collection_is_refused(grid, tmp_path, part):
    edit, match = FORGERIES[part]
    _refused([grid, _forged(tmp_path, edit)], tmp_path / "merged", match)


def test_a_forged_grid_on_a_stage2_task_is_refused_in_any_order(grid, tmp_path):
    """The stage-2 source lets a grid share its tasks, not two grids each other's; and a
    grid sharing a task proves its episodes are its schedule's."""
    t, man = _tables(grid), json.loads((grid / "manifest.json").read_text())
    s2 = set(load_dataset(S2).states["state_id"])  # the grid's episodes in S2's states only
    st = t["steps"]
    inside = (st["state_id"].isin(s2) & st["next_state_id"].isin(s2)).groupby(st["episode_id"])
    keep = inside.all()[lambda x: x].index
    assert len(keep) == 17
    t["episodes"] = t["episodes"][t["episodes"]["episode_id"].isin(keep)]
    t["steps"] = st[st["episode_id"].isin(keep)]
    seen = set(t["steps"]["state_id"]) | set(t["steps"]["next_state_id"])
    t["states"] = t["states"][t["states"]["state_id"].isin(seen)]
    t["transitions"] = _counts(t["steps"])
    t["episodes"]["episode_id"] += 7
    t["steps"]["episode_id"] += 7
    other = _write(tmp_path / "other", man, t)
    _refused(
        [S2, grid, other],
        tmp_path / "m1",
        r"^other/states.parquet: task_id '\w+/\d' is also in grid",
    )
    _refused(
        [S2, other],
        tmp_path / "m2",
        r"^other/episodes.parquet: row 0: episode_id -?\d+ is not the id the schedule gives",
    )


def _scores(path: Path, seed: int) -> str:
    """A ``scores.parquet`` of the contract's form (what ``prm.score`` writes) for every
    observed (state, action); its sha256."""
    tr = load_dataset(path).transitions[["state_id", "action"]].drop_duplicates()
    p = np.random.default_rng(seed).uniform(size=len(tr))
    frame = tr.assign(p_success=p, source="prm:tabular:actor=qwen")
    table = pa.Table.from_pandas(
        frame[list(SCORES_SCHEMA.names)], schema=SCORES_SCHEMA, preserve_index=False
    )
    write_table(conform("scores", table), path / "scores.parquet")
    return hashlib.sha256((path / "scores.parquet").read_bytes()).hexdigest()


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "collect.merge", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )


def test_the_readme_merge_runs_as_written_after_the_prm_step(grid, tmp_path):
    """README: `python -m prm.score data=DATA ...` writes DATA/scores.parquet, then
    `python -m collect.merge 'sources=[DATA,S2]' out=BOTH` (S2 unscored, then scored)."""
    shutil.copytree(grid, tmp_path / "DATA")
    shutil.copytree(S2, tmp_path / "S2")
    sha = _scores(tmp_path / "DATA", 0)
    proc = _cli(tmp_path, "sources=[DATA,S2]", "out=BOTH")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "merged 2 collections -> BOTH: 12 tasks, 649 episodes" in proc.stdout
    assert "DATA/scores.parquet not merged" in proc.stdout
    assert "python -m prm.score data=BOTH prm_dir=PRM" in proc.stdout
    assert not (tmp_path / "BOTH" / "scores.parquet").exists()
    assert load_dataset(tmp_path / "BOTH").scores is None
    sha2 = _scores(tmp_path / "S2", 1)  # scored too: still derived data, not merged
    proc = _cli(tmp_path, "sources=[DATA,S2]", "out=BOTH2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "DATA/scores.parquet, S2/scores.parquet not merged" in proc.stdout
    assert "np." not in proc.stdout + proc.stderr
    for name, digest in (("DATA", sha), ("S2", sha2)):
        assert hashlib.sha256((tmp_path / name / "scores.parquet").read_bytes()).hexdigest() == (
            digest
        )
    man = json.loads((tmp_path / "BOTH2" / "manifest.json").read_text())
    assert [e["scores"]["rows"] for e in man["source"]["merged_from"]] == [
        len(load_dataset(tmp_path / n).scores) for n in ("DATA", "S2")
    ]
    # the merged set rescored, then merged again over it: its scores are not dropped
    _scores(tmp_path / "BOTH", 2)
    kept = (tmp_path / "BOTH" / "scores.parquet").read_bytes()
    with pytest.raises(FileExistsError, match=r"BOTH/scores.parquet: exists .* prm.score"):
        merge_collections([tmp_path / "DATA", tmp_path / "S2"], tmp_path / "BOTH", overwrite=True)
    assert (tmp_path / "BOTH" / "scores.parquet").read_bytes() == kept


def test_help_says_what_merges():
    proc = _cli(ROOT, "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    head = proc.stdout.splitlines()[1]
    assert "disjoint tasks" in head and "stage" in head and "scores" in proc.stdout
