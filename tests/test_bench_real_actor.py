"""bench/real_actor.py --eval-report: the table the real-actor evaluation is reported with
(docs/real-actor.md), on results written by hand."""

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_real_actor", ROOT / "bench" / "real_actor.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _results(d: Path, policy: str, pairs: list[str], success: list[int], calls: float) -> None:
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {
            "policy": policy,
            "split": "test",
            "pair": pairs,
            "success": success,
            "expert_calls": calls,
            "steps": 3,
        }
    ).to_parquet(d / "results.parquet")


def test_eval_report_joins_runs_on_their_common_pairs_and_skips_on_request(tmp_path, capsys):
    bench = _bench()
    pairs = ["a#1", "a#2", "b#1", "b#2"]
    _results(tmp_path / "rule", "rule", pairs, [1, 0, 1, 0], 1.0)
    _results(tmp_path / "helper", "helper", pairs, [1, 1, 1, 0], 0.5)
    _results(tmp_path / "old", "old", pairs[:2], [0, 0], 2.0)  # an older run, fewer pairs
    dirs = [str(tmp_path / d) for d in ("rule", "helper", "old")]
    out = bench.eval_report(dirs)
    assert out["test/rule"]["SR"] == 0.5  # on the 2 pairs every policy ran: a#1, a#2
    assert out["test/helper"]["SR"] == 1.0
    out = bench.eval_report(dirs, skip=("old",))
    assert out["test/rule"]["SR"] == 0.5 and out["test/helper"]["SR"] == 0.75
    assert out["test/helper"]["U"] == 0.5 and "test/old" not in out
    lo, hi = bench.wilson(3, 4)
    assert (out["test/helper"]["lo"], out["test/helper"]["hi"]) == (lo, hi)
    text = capsys.readouterr().out
    assert "4 paired (task, seed) episodes per policy" in text
    assert "| helper | 3/4 = 0.750" in text
    # helper - rule over the 4 pairs: differences 0, 1, 0, 0
    assert "| helper | +0.250 [" in text and "| rule |  | -0.250 [" in text
    with pytest.raises(SystemExit, match="no such policy"):
        bench.eval_report(dirs, skip=("nope",))
    with pytest.raises(SystemExit, match="not an evaluate out directory"):
        bench.eval_report(dirs + [str(tmp_path / "rule" / "results.parquet")])
    with pytest.raises(SystemExit, match="in two runs"):
        bench.eval_report(dirs + [dirs[0]])


def test_eval_report_per_task_and_at_equal_spend_with_the_power(tmp_path, capsys):
    """The policy at 1.5 calls against turn 0 and against the half-and-half mix of turn 0
    and turns 0,1 (the rules' hull at its spend), by hand; successes per task."""
    bench = _bench()
    pairs = ["a#1", "a#2", "b#1", "b#2"]
    _results(tmp_path / "t0", "rule: turn 0", pairs, [1, 0, 0, 0], 1.0)
    _results(tmp_path / "t01", "rule: turns 0,1", pairs, [1, 1, 0, 0], 2.0)
    _results(tmp_path / "sel", "sel", pairs, [1, 1, 1, 0], 1.5)
    out = bench.eval_report([str(tmp_path / d) for d in ("t0", "t01", "sel")])
    d = [1 - 1, 1 - 0, 1 - 0, 0 - 0]  # sel - turn 0
    assert out["test/sel vs rule: turn 0"]["d"] == 0.5
    sd = pd.Series(d, dtype=float).std()
    z = 1.959964 + 0.841621
    assert out["test/sel vs rule: turn 0"]["mde"] == pytest.approx(z * sd / 2, rel=1e-5)
    assert out["test/sel vs rule: turn 0"]["need"] == int(-(-((z * sd / 0.05) ** 2) // 1))
    key = "test/sel vs the rules' hull at equal spend (rule: turn 0 / rule: turns 0,1 mixed 0.50/0.50)"
    assert out[key]["d"] == pytest.approx(0.75 - 0.375)  # mix: 1, 0.5, 0, 0
    text = capsys.readouterr().out
    assert "| a | 2 | 1 | 2 | 2 |" in text and "| b | 2 | 0 | 0 | 1 |" in text
    # no spread (turns 0,1 and turn 0 agree on the pairs of task a): no power to quote
    _results(tmp_path / "t0b", "rule: turn 0", pairs[:2], [1, 0], 1.0)
    _results(tmp_path / "t01b", "rule: turns 0,1", pairs[:2], [1, 0], 2.0)
    out = bench.eval_report([str(tmp_path / d) for d in ("t0b", "t01b")])
    assert out["test/rule: turns 0,1 vs rule: turn 0"]["need"] is None
    assert "| +0.000 [+0.000, +0.000] | n/a (no spread) | n/a |" in capsys.readouterr().out
    # --pool: the splits as one
    frame = pd.read_parquet(tmp_path / "t0b" / "results.parquet")
    frame.assign(split="validation", pair=["c#1", "c#2"]).to_parquet(tmp_path / "t0b" / "v.parquet")
    v = tmp_path / "v"
    v.mkdir()
    (tmp_path / "t0b" / "v.parquet").rename(v / "results.parquet")
    out = bench.eval_report([str(tmp_path / "t0b"), str(v)], pool=True)
    assert out["test+validation/rule: turn 0"]["SR"] == 0.5
    assert "4 paired (task, seed) episodes" in capsys.readouterr().out


def test_eval_report_with_worlds_as_the_unit(tmp_path, capsys):
    """--worlds: the same differences clustered by world (the task id before "/"): three
    worlds of two tasks, one pair each; the worlds' mean differences 1, 0.5, 0 give the t
    interval of three means (equal worlds: CR2 is exactly that, 2 df)."""
    bench = _bench()
    pairs = ["w1/0#1", "w1/1#1", "w2/0#1", "w2/1#1", "w3/0#1", "w3/1#1"]
    _results(tmp_path / "t0", "rule: turn 0", pairs, [0, 0, 0, 0, 0, 0], 1.0)
    _results(tmp_path / "sel", "sel", pairs, [1, 1, 1, 0, 0, 0], 1.0)
    out = bench.eval_report([str(tmp_path / d) for d in ("t0", "sel")], worlds=True)
    w = out["test/sel vs rule: turn 0"]["worlds"]
    assert (w["G"], w["differ"], w["df"]) == (3, 2, 2.0)
    half = 4.302652729911275 * 0.5 / 3**0.5  # t(0.975, 2) * sd of (1, .5, 0) / sqrt(3)
    assert w["mean"] == pytest.approx(0.5) and w["hi"] - 0.5 == pytest.approx(half)
    assert out["test/sel vs rule: turn 0"]["tasks"]["G"] == 6
    text = capsys.readouterr().out
    assert "With worlds as the unit (tasks drawn by world):" in text
    assert (
        f"| sel | rule: turn 0 | +0.500 [{0.5 - half:+.3f}, {0.5 + half:+.3f}] (df 2.0) | 2 of 3"
        in text
    )
    bench.eval_report([str(tmp_path / d) for d in ("t0", "sel")])  # without: no such table
    assert "worlds as the unit" not in capsys.readouterr().out


def _runtimes():
    spec = importlib.util.spec_from_file_location("bench_runtimes", ROOT / "bench" / "runtimes.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_runtimes"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_runtimes_commands_run_one_schedule_under_each_runtime():
    rt = _runtimes()
    sched = rt.Schedule(("w1", "w2"), (0, 3), (0.0, 0.5), (1,))
    hf = rt.collect_command(rt.RUNTIMES["hf-2w"], sched, "/o/hf", python="py")
    llama = rt.collect_command(rt.RUNTIMES["llama-2x1"], sched, "/o/l", "http://h:1/v1", "py")
    assert hf[:3] == ["py", "-m", "collect"]
    for cmd in (hf, llama):
        for o in (
            "schedule.scenarios=[w1,w2]",
            "schedule.tasks=[0,3]",
            "schedule.seeds=[1]",
            "schedule.probabilities=[0.0,0.5]",
            "actor.call_format=lenient",
            "executor.workers=2",
            "executor.shard_size=1",
            "keep_shards=true",
        ):
            assert o in cmd
    assert "collect/actor=qwen_coder_0_5b" in hf and "actor.threads=1" in hf
    assert "out=/o/hf" in hf and not any(o.startswith("actor.base_url") for o in hf)
    assert "collect/actor=qwen_coder_0_5b_llamacpp" in llama
    assert "actor.base_url=http://h:1/v1" in llama
    assert not any(o.startswith("actor.threads") for o in llama)
    assert not any(o.startswith("env.max_turns") for o in hf)
    capped = rt.Schedule(max_turns=6)
    one = rt.collect_command(rt.RUNTIMES["hf-1w"], capped, "/o", python="p")
    assert "actor.threads=2" in one and "env.max_turns=6" in one
    with pytest.raises(ValueError, match="base_url"):
        rt.collect_command(rt.RUNTIMES["llama-1x2"], sched, "/o")


def test_runtimes_rate_after_start_and_the_table():
    rt = _runtimes()
    # 2 workers: from the 2nd finished episode (t=100) to the last (t=300): 3 episodes in 200 s
    assert rt.steady_rate([300.0, 100.0, 50.0, 150.0, 250.0], 2) == pytest.approx(54.0)
    assert rt.steady_rate([10.0, 20.0], 2) is None
    q = {
        "turns": 2.5,
        "success": 0.25,
        "format_errors": 0.5,
        "end_reason": {"final": 3, "format_error": 1},
        "new_tokens": 40.0,
    }
    a = rt.Result("hf-1w", "A", 4, 360.0, 40.0, 50.0, 800.0, 9.5, q)
    b = rt.Result("llama-2x1", "B", 4, 120.0, 120.0, None, 200.0, 10.0, q)
    text = rt.format_table([a, b])
    assert "| A | 4 | 360 | 40.0 | 1.00x | 50.0 | 1.00x | 200 | 1.00x | 9.5 |" in text
    assert "| B | 4 | 120 | 120.0 | 3.00x | — | — | 50 | 4.00x | 10.0 |" in text
    assert "| A | 2.50 | 0.250 | 0.50 | final 3, format_error 1 | 40 |" in text


def test_publish_partial_writes_the_finished_shards_with_a_resume_command(tmp_path):
    """A collection stopped part way: its finished shards as a dataset that loads, the
    manifest saying how many of the plan's episodes it holds and the command that resumes
    it (quoted for a shell); shards of another collection are refused."""
    import shlex

    from collector_helpers import run_cli, small_args

    from collect.shards import ShardStore
    from helpdp.data import load_dataset

    bench = _bench()
    out, work = tmp_path / "run", tmp_path / "work"
    r = run_cli(out, work, "keep_shards=true")
    assert r.returncode == 0, r.stderr[-2000:]
    store = ShardStore(out)
    store.discard(1)
    store.discard(3)  # as if the run had stopped before these two
    args = small_args(out, work, "keep_shards=true")
    partial = bench.publish_partial(str(tmp_path / "partial"), args)
    assert partial["episodes"] == 2 and partial["planned_episodes"] == 4
    resume = shlex.split(partial["resume"])
    assert resume[:4] == ["python", "-m", "collect", "out=DIR"]
    assert resume[4:] == [a for a in args if not a.startswith("out=")]
    data = load_dataset(tmp_path / "partial")
    assert data.manifest["source"]["partial"] == partial
    assert len(data.episodes) == 2
    with pytest.raises(SystemExit, match="shards of another collection"):
        bench.publish_partial(str(tmp_path / "other"), [*args, "schedule.seed=7"])
