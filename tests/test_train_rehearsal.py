"""The B200 rehearsal at its smallest size (bench/rehearsal.py, docs/grpo.md): two CPU
ranks under accelerate launch, the stand-in expert, a kill after rollout batch 2 and a
resume from checkpoint-2, every check of the bench. Slow: two launches of two ranks."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("accelerate")

BENCH = Path(__file__).resolve().parents[1] / "bench" / "rehearsal.py"


def _bench():
    spec = importlib.util.spec_from_file_location("rehearsal", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_rank_rehearsal_kill_and_resume(tmp_path):
    rc = _bench().main(["--out", str(tmp_path), "--steps", "4", "--timeout", "800"])
    report = json.loads((tmp_path / "rehearsal.json").read_text())
    failed = [k for k, ok in report["checks"].items() if not ok]
    assert rc == 0 and not failed, failed
    ranks = report["ranks"]
    assert set(ranks) == {"0", "1"}
    for r in ranks.values():
        assert r["batches"] == [0, 1, 2, 3] and r["episodes"] == 16  # 4 steps x 1 task x 4
        assert r["gate_grants"] == r["episode_expert_calls"] > 0
        assert r["stub_help_after_resume"] == r["grants_after_resume"]


def test_the_stand_in_logs_each_request_and_keeps_its_bound():
    import openai

    bench = _bench()
    with bench.StubExpert(max_requests=2) as stub:
        client = openai.OpenAI(base_url=stub.url, api_key="rank1", max_retries=0)
        system = {"role": "system", "content": "You are an expert operator of a web app"}
        reply = client.chat.completions.create(model="m", messages=[system])
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(openai.APIStatusError):
            client.chat.completions.create(model="m", messages=[system])
        client.close()
    assert reply.choices[0].message.content == bench.PLAN
    assert [(e["rank"], e["kind"]) for e in stub.log] == [("rank1", "help"), ("rank1", "other")]


def test_doctests_of_the_multi_rank_pieces():
    import doctest

    import helpdp.train.__main__ as command
    import helpdp.train.ranks as ranks

    for mod in (ranks, command):
        res = doctest.testmod(mod)
        assert res.attempted > 0 and res.failed == 0, mod.__name__


def test_rollout_state_round_trip_and_the_checkpoint_callback(tmp_path):
    from types import SimpleNamespace

    from helpdp.train.gate import SplitSchedule
    from helpdp.train.ranks import (
        RolloutStateCallback,
        restore_rollout_state,
        rollout_state,
        state_file,
    )

    s = SplitSchedule(kind="adaptive", window=4)
    s.observe([True, True, True, True])
    s.observe([False, False, False, True])  # rate 0.25: expert_heavy -> solo_heavy at batch 1
    before = SimpleNamespace(step=2, episodes=8, split=s)
    cb = RolloutStateCallback(before, rank=1)
    cb.on_save(SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=2), None)
    saved = json.loads(state_file(tmp_path / "checkpoint-2", 1).read_text())
    assert saved == rollout_state(before)
    # the file keeps the split under its old key, `schedule`; one naming it `split` loads too
    renamed = {"split" if k == "schedule" else k: v for k, v in saved.items()}
    assert "schedule" in saved and "split" in renamed
    for state in (saved, renamed):
        after = SimpleNamespace(step=0, episodes=0, split=SplitSchedule(kind="adaptive", window=4))
        restore_rollout_state(after, state)
        assert (after.step, after.episodes) == (2, 8)
        assert after.split.phase == "solo_heavy" and after.split.n_expert(8) == 2
        assert after.split.transitions == [(1, "expert_heavy", "solo_heavy", 0.25)]
        assert list(after.split.recent) == [False, False, False, True]


def test_resume_finds_the_newest_checkpoint_or_says_what_is_missing(tmp_path):
    from types import SimpleNamespace

    from helpdp.train.trainer import find_checkpoint

    cfg = SimpleNamespace(out=str(tmp_path), resume="last")
    with pytest.raises(ValueError, match="no checkpoint-N in"):
        find_checkpoint(cfg)
    for n in (2, 9, 10):
        (tmp_path / "checkpoints" / f"checkpoint-{n}").mkdir(parents=True)
    assert find_checkpoint(cfg).name == "checkpoint-10"  # numerically, not by name
    cfg.resume = str(tmp_path / "checkpoints" / "checkpoint-9")
    with pytest.raises(ValueError, match="not a checkpoint"):
        find_checkpoint(cfg)
    (tmp_path / "checkpoints" / "checkpoint-9" / "trainer_state.json").write_text("{}")
    assert find_checkpoint(cfg).name == "checkpoint-9"
    assert find_checkpoint(SimpleNamespace(out=str(tmp_path), resume="")) is None
