"""Collections of disjoint tasks merge into one dataset (``collect.merge``):
the demo cut in two by scenario and merged again is the demo, for the DP too."""

import json

import numpy as np
import pandas as pd
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
        tables = {
            "states": sub.states,
            "transitions": sub.transitions,
            "episodes": sub.episodes,
            "steps": sub.steps,
        }
        out.append(write_dataset(tmp_path / name, man, tables))
    return ds, out


def test_the_demo_cut_in_two_merges_back_into_the_demo(tmp_path, capsys):
    demo, (a, b) = _halves(tmp_path)
    out = run_merge(MergeConfig(sources=[str(a), str(b)], out=str(tmp_path / "merged")))
    assert "30 tasks, 630 episodes" in capsys.readouterr().out
    m = load_dataset(out)
    for table, key in (
        ("states", ["state_id"]),
        ("transitions", ["state_id", "action", "next_state_id"]),
        ("episodes", ["episode_id"]),
    ):
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


def _hostile_b(tmp_path, attack):
    """The demo's two halves, part-b changed by ``attack(tables, a_tables)`` and rewritten
    (its manifest included) as a hostile collection would."""
    _, (a, b) = _halves(tmp_path)
    da, db = load_dataset(a), load_dataset(b)
    tables = {
        "states": db.states,
        "transitions": db.transitions,
        "episodes": db.episodes,
        "steps": db.steps,
    }
    man = attack(tables, da) or db.manifest
    for name, frame in tables.items():
        frame.to_parquet(b / f"{name}.parquet", index=False)
    (b / "manifest.json").write_text(man if isinstance(man, str) else json.dumps(man))
    return a, b


def _refused(tmp_path, a, b, match):
    with pytest.raises(DatasetError, match=match):
        merge_collections([a, b], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
    clean = tmp_path / "clean"  # the next merge of honest sources runs
    _, (a2, b2) = _halves(clean)
    merged = load_dataset(merge_collections([a2, b2], clean / "merged"))
    assert len(merged.episodes) == 630


def test_episodes_for_another_sources_task_are_refused(tmp_path):
    def attack(tables, da):  # five failed episodes for part-a's first task, new ids
        extra = da.episodes[da.episodes["task_id"] == "e_commerce_admin_1/0"].head(5).copy()
        extra["episode_id"] = extra["episode_id"] + 10_000_000
        extra["success"] = False
        tables["episodes"] = pd.concat([tables["episodes"], extra], ignore_index=True)

    a, b = _hostile_b(tmp_path, attack)
    _refused(
        tmp_path,
        a,
        b,
        r"^part-b/episodes.parquet: row 420: task_id "
        r"'e_commerce_admin_1/0' is not one of part-b's own tasks",
    )


def test_steps_for_another_sources_episode_are_refused(tmp_path):
    def attack(tables, da):
        extra = tables["steps"].head(3).copy()
        extra["episode_id"] = da.episodes["episode_id"].iloc[0]
        tables["steps"] = pd.concat([tables["steps"], extra], ignore_index=True)

    a, b = _hostile_b(tmp_path, attack)
    n = len(load_dataset(b).steps) - 3
    _refused(
        tmp_path,
        a,
        b,
        rf"^part-b/steps.parquet: row {n}: episode_id -?\d+ is not one "
        "of part-b's own episodes",
    )


def test_a_manifest_nested_200000_deep_is_one_line_exit_2(tmp_path):
    import subprocess
    import sys

    def attack(tables, da):
        return '{"format": 1, "x": ' + "[" * 200_000 + "]" * 200_000 + "}"

    a, b = _hostile_b(tmp_path, attack)
    _refused(tmp_path, a, b, "^part-b/manifest.json: manifest nested deeper than 64 levels$")
    proc = subprocess.run(
        [sys.executable, "-m", "collect.merge", f"sources=[{a},{b}]", f"out={tmp_path / 'cli'}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith("part-b/manifest.json: manifest nested deeper than 64 levels")
    ), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


# the shipped real-actor data's actor (transformers in process) and the same model behind
# collect.realserve's llama.cpp servers (the openai actor): one model, two runtimes
PIN = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
HF = {
    "kind": "hf",
    "name": None,
    "call_format": "lenient",
    "temperature": 0.7,
    "top_p": 0.8,
    "max_tokens": 192,
    "model": "",
    "stop_after_tool_call": True,
    "dtype": "float32",
    "trust_remote_code": False,
    "chat_template_kwargs": {},
    "device": "cpu",
    "local_files_only": True,
    "max_prompt_tokens": 0,
    "gguf": "qwen2.5-coder-0.5b-instruct-q4_k_m",
    "model_sha256": PIN,
    "cache_dir": None,
    "prefix_cache": True,
    "threads": 1,
}
LLAMA = {
    "kind": "openai",
    "name": None,
    "base_url": "http://127.0.0.1:8011/v1",
    "model": "qwen2.5-coder-0.5b-instruct-q4_k_m",
    "api_key_env": "OPENAI_API_KEY",
    "timeout_s": 1800.0,
    "retries": 3,
    "call_format": "lenient",
    "temperature": 0.7,
    "top_p": 0.8,
    "max_tokens": 192,
    "concurrency": 1,
    "stop_after_tool_call": True,
    "model_sha256": PIN,
    "sampler": {
        "top_k": 50,
        "min_p": 0.0,
        "typical_p": 1.0,
        "repeat_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    },
}


def _runtimes(tmp_path, actor_a, actor_b):
    """The demo's halves with part-a's actor ``actor_a`` and part-b's ``actor_b``."""
    _, (a, b) = _halves(tmp_path)
    for path, actor in ((a, actor_a), (b, actor_b)):
        man = json.loads((path / "manifest.json").read_text())
        man["source"]["config"]["actor"] = actor
        man["source"]["actor"] = "qwen2.5-coder-0.5b-instruct-q4_k_m"
        man["source"]["actor_kind"] = actor["kind"]
        (path / "manifest.json").write_text(json.dumps(man))
    return a, b


def test_two_runtimes_of_one_model_merge_and_each_part_keeps_its_runtime(tmp_path):
    """top_p 1: the order of temperature and truncation cannot matter, one model."""
    hf, llama = {**HF, "top_p": 1.0}, {**LLAMA, "top_p": 1.0}
    a, b = _runtimes(tmp_path, hf, llama)
    m = load_dataset(merge_collections([a, b], tmp_path / "merged"))
    assert len(m.episodes) == 630
    parts = m.manifest["source"]["merged_from"]
    assert [p["actor"]["kind"] for p in parts] == ["hf", "openai"]
    assert parts[1]["actor"]["base_url"] == "http://127.0.0.1:8011/v1"
    assert m.manifest["source"]["config"]["actor"] == hf  # the first source's, as before
    # an hf actor on the make-real-actor model without model_sha256 has the pin
    unpinned = {**hf, "model_sha256": ""}
    a2, b2 = _runtimes(tmp_path / "unpinned", llama, unpinned)
    assert len(load_dataset(merge_collections([a2, b2], tmp_path / "m2")).episodes) == 630


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"temperature": 1.0}, "actor.temperature"),
        ({"top_p": 0.95}, "actor.top_p"),
        ({"max_tokens": 256}, "actor.max_tokens"),
        ({"model_sha256": "0" * 64}, "actor.model_sha256"),
        ({"call_format": "strict"}, "actor.call_format"),
        ({"stop_after_tool_call": False}, "actor.stop_after_tool_call"),
        ({"sampler": {}}, "actor.sampler.frequency_penalty"),  # the server's own defaults
        ({"sampler": {**LLAMA["sampler"], "repeat_penalty": 1.1}}, "actor.sampler.repeat_penalty"),
        ({"model_sha256": ""}, "actor.base_url"),  # no sha256: compared whole
        ({}, "actor.sampler_order"),  # T 0.7, top-p 0.8: llama.cpp cuts before it scales
    ],
)
def test_another_model_or_sampling_is_refused_naming_the_field(tmp_path, change, field):
    a, b = _runtimes(tmp_path, HF, {**LLAMA, **change})
    with pytest.raises(DatasetError, match=rf"^part-b/manifest.json: .*in .*{field}"):
        merge_collections([a, b], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_another_actor_name_is_refused(tmp_path):
    a, b = _runtimes(tmp_path, {**HF, "top_p": 1.0}, {**LLAMA, "top_p": 1.0})
    man = json.loads((b / "manifest.json").read_text())
    man["source"]["actor"] = "another-model"
    (b / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(DatasetError, match=r"in source\.actor: not the same experiment"):
        merge_collections([a, b], tmp_path / "merged")


def test_a_field_only_one_source_records_is_listed_not_compared(tmp_path):
    """A config field the code added after a source was collected (only one manifest has
    it) is not a difference: it is listed under the source's ``unchecked``."""
    a, b = _runtimes(tmp_path, {**HF, "top_p": 1.0}, {**LLAMA, "top_p": 1.0})
    man = json.loads((b / "manifest.json").read_text())
    man["source"]["config"]["env"]["a_newer_option"] = 64  # a newer collector's option
    (b / "manifest.json").write_text(json.dumps(man))
    m = load_dataset(merge_collections([a, b], tmp_path / "merged"))
    parts = m.manifest["source"]["merged_from"]
    assert "unchecked" not in parts[0] and parts[1]["unchecked"] == ["env.a_newer_option"]
    man["source"]["config"]["env"]["max_turns"] = 6  # a recorded field that differs
    (b / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(DatasetError, match=r"differs from part-a's in env\.max_turns: "):
        merge_collections([a, b], tmp_path / "m2")


def _edit_both(tmp_path, edit_a, edit_b):
    """The demo's halves with ``edit_a(config)`` and ``edit_b(config)`` applied to the
    ``source.config`` of part-a's and part-b's manifests."""
    _, (a, b) = _halves(tmp_path)
    for path, edit in ((a, edit_a), (b, edit_b)):
        man = json.loads((path / "manifest.json").read_text())
        edit(man["source"]["config"])
        (path / "manifest.json").write_text(json.dumps(man))
    return a, b


def _hint(c):
    c["interventions"]["hint"] = dict(c["interventions"]["oracle"])


def _tokenizer(revision):
    def edit(c):
        c["text"]["tokenizer"] = {"name": "Qwen/Qwen3-0.6B", **revision}

    return edit


def _policy(extra):
    def edit(c):
        c["policy"] = {"dir": "runs/search", **extra}

    return edit


def _max_calls(limits):
    def edit(c):
        c["interventions"]["oracle"]["max_calls"] = limits

    return edit


@pytest.mark.parametrize(
    ("edit_a", "edit_b", "field"),
    [
        (lambda c: None, _hint, "interventions.hint"),  # another intervention, by name
        (_tokenizer({}), _tokenizer({"revision": "main"}), "text.tokenizer.revision"),
        (_policy({"budget": 1.0}), _policy({}), "policy.budget"),
        (_max_calls({"blind": 2}), _max_calls({}), "interventions.oracle.max_calls.blind"),
    ],
    ids=["intervention", "tokenizer", "policy", "max_calls"],
)
def test_a_key_only_one_source_records_in_a_free_form_value_is_refused(
    tmp_path, edit_a, edit_b, field
):
    """Within a free-form value (a dict in a field declared dict or Any) a key one source
    has and the other lacks is a difference: only a config class's own fields, which
    code versions add and remove, are listed as unchecked."""
    a, b = _edit_both(tmp_path, edit_a, edit_b)
    with pytest.raises(DatasetError) as e:
        merge_collections([a, b], tmp_path / "merged")
    assert str(e.value) == (
        f"part-b/manifest.json: source.config differs from part-a's in {field}: not the same "
        "experiment (only the tasks, splits, seeds and the runtime of one model (same weights "
        "sha256, sampling, turn format) may differ)"
    )
    assert not (tmp_path / "merged").exists()


def test_declared_fields_only_one_source_records_are_unchecked_at_every_depth(tmp_path):
    """A field of a config class (the collection's, an intervention's, the schedule's)
    that one source's code did not record merges, listed under ``unchecked``."""

    def older(c):  # a collector before these fields existed
        del c["env"]["max_idle_envs"], c["interventions"]["oracle"]["error_turns"]
        del c["schedule"]["seed"]

    def newer(c):  # a text option this one's code no longer records
        del c["text"]["max_tokens"]

    a, b = _edit_both(tmp_path, newer, older)
    m = load_dataset(merge_collections([a, b], tmp_path / "merged"))
    parts = m.manifest["source"]["merged_from"]
    assert "unchecked" not in parts[0]
    assert parts[1]["unchecked"] == [
        "env.max_idle_envs",
        "interventions.oracle.error_turns",
        "text.max_tokens",
        "schedule.seed",
    ]
    assert len(m.episodes) == 630
