"""helpdp.evaluate: paired statistics by hand, and an end-to-end run in the environments."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpdp.evaluate import compare, equal_spend_baseline, paired_ci, summarize


def test_paired_ci_by_hand():
    m, lo, hi = paired_ci(np.array([1.0, 0.0, 1.0, 1.0]))
    half = 1.96 * np.std([1, 0, 1, 1], ddof=1) / 2
    assert (m, lo, hi) == pytest.approx((0.75, 0.75 - half, 0.75 + half))
    assert np.isnan(paired_ci(np.array([]))[0])


def _runs(policy, success, calls, n=4):
    return pd.DataFrame(
        {
            "policy": policy,
            "split": "test",
            "pair": [f"t#{i}" for i in range(n)],
            "success": success,
            "expert_calls": calls,
            "steps": 3,
            "spl": 0.5,
            "policy_errors": 0,
            "invalid": False,
        }
    )


def test_equal_spend_interpolates_the_random_curve_per_pair():
    a = _runs("random p=0.1", [0, 0, 1, 0], [0, 1, 0, 1]).set_index("pair")  # U 0.5, SR .25
    b = _runs("random p=0.3", [1, 1, 1, 0], [2, 1, 2, 1]).set_index("pair")  # U 1.5, SR .75
    base, how = equal_spend_baseline(1.0, {0.1: a, 0.3: b})
    assert base.tolist() == [0.5, 0.5, 1.0, 0.0] and "0.50/0.50" in how
    assert equal_spend_baseline(3.0, {0.1: a, 0.3: b}) is None  # outside the curve


def test_compare_is_paired_and_at_equal_spend():
    r = pd.concat(
        [
            _runs("random p=0.1", [0, 0, 1, 0], [0, 1, 0, 1]),
            _runs("random p=0.3", [1, 1, 1, 0], [2, 1, 2, 1]),
            _runs("never", [0, 0, 0, 0], [0, 0, 0, 0]),
            _runs("smart", [1, 1, 1, 1], [1, 1, 1, 1]),
        ]
    )
    c = compare(r, "smart", "test", [0.1, 0.3])
    assert c["U"] == 1.0 and c["vs_random_equal_spend"][0] == pytest.approx(0.5)
    assert c["vs never"][0] == 1.0
    s = summarize(r)
    row = s[s["policy"] == "smart"].iloc[0]
    assert (row["SR"], row["U"], row["episodes"], row["U_ci"]) == (1.0, 1.0, 4, 0.0)
    rnd = s[s["policy"] == "random p=0.1"].iloc[0]
    assert rnd["U_ci"] == pytest.approx(1.96 * np.std([0, 1, 0, 1], ddof=1) / 2)
    # what a call bought: (SR - SR of never) / U; undefined without calls
    gain = s.set_index("policy")["gain_per_call"]
    assert gain["smart"] == 1.0 and gain["random p=0.3"] == pytest.approx(0.75 / 1.5)
    assert gain["random p=0.1"] == pytest.approx(0.25 / 0.5) and np.isnan(gain["never"])


def test_oracle_table_is_fitted_on_the_evaluated_split_only(tmp_path):
    """``oracle=true``: the DP table fitted on the test tasks themselves knows their
    states (the ordinary table, fitted on train tasks, knows none of them) and spends
    the budget under the test tasks' own counts."""
    from helpdp import demo_dataset_path, load_dataset
    from helpdp.evaluate import EvaluateConfig, oracle_policy, policies
    from helpdp.splits import task_splits

    ds = load_dataset(demo_dataset_path())
    splits = task_splits(ds)
    test_states = set(
        ds.states.loc[ds.states["task_id"].isin(splits.index[splits == "test"]), "state_id"]
    )
    cfg = EvaluateConfig(budget=1.0)
    oracle = oracle_policy(cfg, ds, "test", tmp_path)
    assert oracle.known() and oracle.known() <= test_states
    assert oracle.search["expected_usage"] == pytest.approx(1.0, abs=1e-6)
    assert "fitted on these test tasks" in oracle.name
    table = [
        p
        for p in policies(cfg, ds, sorted(splits.index[splits == "train"]), tmp_path)
        if p.name.startswith("dp table")
    ][0]
    assert not (table.known() & test_states)
    with pytest.raises(ValueError, match="no nosuch task"):
        oracle_policy(cfg, ds, "nosuch", tmp_path)


def test_only_baselines_are_reused_and_their_key_holds_every_field():
    from helpdp.evaluate import reuse_key
    from helpdp.policies import Never, RandomStates, TablePolicy, TurnZero

    assert reuse_key(Never()) == "Never(name='never')"
    a, b = reuse_key(RandomStates(0.1, seed=0)), reuse_key(RandomStates(0.1, seed=1))
    assert a != b and "p=0.1" in a  # same name, another seed: not the same run
    assert reuse_key(TurnZero()) is not None
    assert reuse_key(TablePolicy({1: 1})) is None  # fitted to data: always run afresh


def test_rerun_keeps_only_the_baselines_runs(tmp_path, monkeypatch):
    """A rerun into the same out= hands the collector a baseline's run directory as it
    was (to resume its shards), but a fitted policy's, or a baseline's whose fields
    changed, is emptied first: nothing is resumed under another policy's name."""
    import collect.collector as collector
    from helpdp.evaluate import EvaluateConfig, evaluate

    seen = {}

    def fake_collect(config, help_policy=None):
        out = Path(config.out)
        seen[help_policy.name] = (out / "marker").exists()
        out.mkdir(parents=True, exist_ok=True)
        (out / "marker").write_text("x")
        pd.DataFrame(
            {
                "task_id": ["smart_home_1/2"],
                "seed": [100],
                "success": [True],
                "outcome": ["complete"],
                "expert_calls": [0],
                "steps": [3],
                "policy_errors": [0],
                "format_errors": [0],
                "errors": [0],
                "blind_calls": [0],
                "recovery_calls": [0],
            }
        ).to_parquet(out / "episodes.parquet")

    monkeypatch.setattr(collector, "collect", fake_collect)
    cfg = EvaluateConfig(
        seeds=[100],
        splits=["test"],
        random_p=[0.1],
        out=str(tmp_path),
        turn_rules=[[3, 0]],
        progress=False,
    )
    evaluate(cfg)
    assert not any(seen.values())  # a fresh out: nothing to resume
    evaluate(cfg)
    assert seen["never"] and seen["random p=0.1"] and seen["rule: turn 0"]
    assert seen["rule: turns 0,3"]  # the turn_rules are baselines too
    assert not seen["dp table (budget 1)"]  # fitted: always afresh
    evaluate(EvaluateConfig(**{**cfg.__dict__, "seed": 1}))
    assert seen["never"] and not seen["random p=0.1"]  # another seed: another run
    evaluate(EvaluateConfig(**{**cfg.__dict__, "reuse": False}))
    assert not any(seen.values())
    with pytest.raises(ValueError, match="turn_rules"):
        evaluate(EvaluateConfig(**{**cfg.__dict__, "turn_rules": [0, 3]}))


def test_task_mix_buys_help_where_a_call_gains_most():
    from helpdp.evaluate import task_mix

    # task a: a call at turn 0 gains 0.3; task b: 0.1 per call, up to 5 calls
    pts = pd.DataFrame(
        [
            ("a", "never", 0.5, 0.0),
            ("a", "turn 0", 0.8, 1.0),
            ("a", "always", 0.9, 5.0),
            ("b", "never", 0.5, 0.0),
            ("b", "turn 0", 0.6, 1.0),
            ("b", "always", 1.0, 5.0),
            ("b", "waste", 0.55, 3.0),
        ],
        columns=["task_id", "policy", "SR", "U"],
    )
    assert task_mix(pts, 0.5) == {"a": {"turn 0": 1.0}, "b": {"never": 1.0}}
    assert task_mix(pts, 0.25) == {"a": {"never": 0.5, "turn 0": 0.5}, "b": {"never": 1.0}}
    m = task_mix(pts, 1.0)  # a's turn 0, then b's segments (slope 0.1 each, collinear)
    assert m["a"] == {"turn 0": 1.0} and sum(m["b"].values()) == pytest.approx(1.0)

    def _mix_value(points, mix):  # mean SR and U of a mixture, over tasks
        p = points.set_index(["task_id", "policy"])
        sr = [sum(w * p.loc[(t, k), "SR"] for k, w in m.items()) for t, m in mix.items()]
        u = [sum(w * p.loc[(t, k), "U"] for k, w in m.items()) for t, m in mix.items()]
        return np.mean(sr), np.mean(u)

    assert _mix_value(pts, m) == pytest.approx(((0.8 + 0.6) / 2, 1.0))
    assert _mix_value(pts, task_mix(pts, 100.0)) == pytest.approx(((0.9 + 1.0) / 2, 5.0))
    with pytest.raises(ValueError, match="zero-call"):
        task_mix(pts[pts["policy"] != "never"], 1.0)


def test_headroom_is_cross_fitted_on_seed_halves():
    from helpdp.evaluate import headroom

    rows = []
    for seed in range(40):
        # turn 0 succeeds on a at 3 seeds in 4, on b at the even seeds only
        for task, lucky in (("a", seed % 4 != 0), ("b", seed % 2 == 0)):
            rows += [
                ("never", "test", task, seed, False, 0),
                ("turn 0", "test", task, seed, lucky, 1),
            ]
    r = pd.DataFrame(
        rows, columns=["policy", "split", "task_id", "seed", "success", "expert_calls"]
    )
    r["pair"] = r["task_id"] + "#" + r["seed"].astype(str)
    h = headroom(r, "test", 0.5, ["never", "turn 0"])
    assert h["mix"] == {"a": {"turn 0": 1.0}, "b": {"never": 1.0}}
    assert h["insample"] == pytest.approx((0.375, 0.5))  # a's turn 0 (0.75) beats b's (0.5)
    # the even seeds pick b (1.0 against a's 0.5), which gives 0 on the odd seeds; the odd
    # seeds pick a (1.0), which gives 0.5 on the even ones: (0 + 0.25) / 2
    assert h["crossfit"] == pytest.approx((0.125, 0.5))


def test_compare_against_the_best_mix_of_baselines_at_equal_spend():
    from helpdp.evaluate import compare, mix_baseline

    rows = []
    for seed in range(40):
        for task in ("a", "b"):
            pair = f"{task}#{seed}"
            rows += [
                ("never", "test", pair, task, seed, False, 0),
                ("turn 0", "test", pair, task, seed, task == "a" or seed % 2 == 0, 1),
                # smart: one call on a (succeeds), none on b (succeeds anyway)
                ("smart", "test", pair, task, seed, True, int(task == "a")),
            ]
    r = pd.DataFrame(
        rows, columns=["policy", "split", "pair", "task_id", "seed", "success", "expert_calls"]
    )
    for crossfit in (False, True):
        base, calls = mix_baseline(r, "test", 0.5, ["never", "turn 0"], crossfit=crossfit)
        # at half a call per episode the mix buys a's turn 0 (chosen on either half)
        assert calls == pytest.approx(0.5) and base.mean() == pytest.approx(0.5)
        assert (base[base.index.str.startswith("a")] == 1).all() and len(base) == 80
    # with hindsight, at one call: turn 0 everywhere; b's pairs succeed on even seeds
    base, calls = mix_baseline(r, "test", 1.0, ["never", "turn 0"])
    assert calls == 1.0 and base.mean() == pytest.approx(0.75)
    c = compare(r, "smart", "test", [], ["never", "turn 0"])
    assert c["vs_best_mix_equal_spend"][0] == pytest.approx(0.5) and c["best_mix_calls"] == 0.5
    assert "vs_best_mix_equal_spend" not in compare(r, "turn 0", "test", [], ["never", "turn 0"])
    from helpdp.evaluate import mix_curve

    curve = mix_curve(r, "test", ["never", "turn 0"], n=5)  # a's turn 0 first, then b's
    assert curve["U"].tolist() == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    assert curve["SR"].tolist() == pytest.approx([0, 0.25, 0.5, 0.625, 0.75])
    assert mix_curve(r, "train", ["never"]) is None
    odd_missing = r[r["seed"] % 2 == 0]
    assert mix_baseline(odd_missing, "test", 0.5, ["never", "turn 0"], crossfit=True) is None
    assert mix_baseline(r, "test", 0.5, ["nothing"]) is None


def test_the_environments_run_the_tasks_the_data_puts_in_the_split(tmp_path, monkeypatch):
    """Policies are fitted on the data's train tasks (its episodes' split column), so the
    environments run the data's test tasks under `splits=[test]`, also where the data was
    relabelled (a world family held out) and its collection config would split otherwise;
    the config handed to the collector schedules exactly those tasks."""
    import shutil

    from helpdp import demo_dataset_path
    from helpdp.evaluate import EvaluateConfig, evaluate

    data = tmp_path / "data"
    shutil.copytree(demo_dataset_path(), data)
    ep = pd.read_parquet(data / "episodes.parquet")
    old_test = sorted(ep.loc[ep["split"] == "test", "task_id"].unique())
    family = ep["task_id"].str.startswith("workflow_automation_1/")
    ep.loc[~family & (ep["split"] == "test"), "split"] = "validation"
    ep.loc[family, "split"] = "test"
    ep.to_parquet(data / "episodes.parquet", index=False)
    want = sorted(ep.loc[family, "task_id"].unique())
    assert want != old_test and len(want) == 10

    seen, _ = _record_scheduled_tasks(monkeypatch)
    cfg = EvaluateConfig(
        data=str(data),
        seeds=[100],
        splits=["test"],
        random_p=[],
        out=str(tmp_path / "e"),
        progress=False,
        ope=False,
        skip=["random episodes p=0.5", "rule: after failure", "rule: turn 0 + after failure"],
    )
    evaluate(cfg)
    assert seen and all(s == want for s in seen)  # the data's test tasks, not the config's
    # train: the data's train tasks exactly (the former test tasks are validation now)
    seen.clear()
    evaluate(EvaluateConfig(**{**cfg.__dict__, "splits": ["train"]}))
    assert seen[0] == sorted(ep.loc[ep["split"] == "train", "task_id"].unique())


def _record_scheduled_tasks(monkeypatch) -> tuple[list, list]:
    """Replace the collector by one that records the task ids its config schedules and
    the actor object it is handed, and writes one successful episode per (task, seed):
    what evaluate hands the environments."""
    import collect.collector as collector
    from collect.plan import plan_episodes

    seen, actors = [], []

    def fake_collect(config, help_policy=None, actor=None):
        specs = plan_episodes(collector.as_config(config))  # the collector's own plan
        actors.append(actor)
        seen.append(sorted({s.task_id for s in specs}))
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(
            {
                "task_id": [s.task_id for s in specs],
                "seed": [s.seed for s in specs],
                "success": True,
                "outcome": "complete",
                "expert_calls": 0,
                "steps": 3,
                "policy_errors": 0,
                "format_errors": 0,
                "errors": 0,
                "blind_calls": 0,
                "recovery_calls": 0,
            }
        ).to_parquet(out / "episodes.parquet")

    monkeypatch.setattr(collector, "collect", fake_collect)
    return seen, actors


def test_tasks_runs_held_out_tasks_outside_the_collections_schedule(tmp_path, monkeypatch):
    """The real-actor data was collected on task indices 0-6 of each world, so by default
    the environments run the test tasks among them; `tasks=[7]` runs the test tasks at
    index 7 (one e-commerce task, one workflow task), which that schedule never reaches."""
    from helpdp.evaluate import EvaluateConfig, evaluate

    seen, _ = _record_scheduled_tasks(monkeypatch)
    cfg = EvaluateConfig(
        data="helpdp/data/real-actor",
        seeds=[100],
        splits=["test"],
        random_p=[],
        out=str(tmp_path / "e"),
        progress=False,
        ope=False,
        baselines=False,
        policy_files=[],
    )
    evaluate(cfg)
    assert seen[0] == [
        "e_commerce_admin_1/6",
        "smart_home_1/2",
        "workflow_automation_1/0",
        "workflow_automation_1/4",
    ]
    seen.clear()
    evaluate(EvaluateConfig(**{**cfg.__dict__, "tasks": [7], "out": str(tmp_path / "f")}))
    assert seen[0] == ["e_commerce_admin_1/7", "workflow_automation_1/7"]
    # scenarios: the held-out tasks of other worlds than the collection's (with tasks)
    seen.clear()
    new = {"tasks": [0, 1, 2], "scenarios": ["workflow_automation_1", "smart_home_1"]}
    evaluate(EvaluateConfig(**{**cfg.__dict__, **new, "out": str(tmp_path / "g")}))
    assert seen[0] == ["smart_home_1/2", "workflow_automation_1/0"]


def test_a_real_model_loads_once_per_evaluation_and_each_run_gets_a_fresh_actor(
    tmp_path, monkeypatch
):
    """The real actor's weights load once (tens of seconds on CPU); every policy's run gets
    an actor of its own on them, so no KV cache carries from one run into the next."""
    import collect.actors as actors
    from helpdp.evaluate import EvaluateConfig, evaluate

    loads = []

    class StubHF:  # HFActor's constructor: loads unless handed a model and tokenizer
        def __init__(self, config, *, model=None, tokenizer=None):
            loads.append(model is None)
            self.model = model if model is not None else object()
            self.tokenizer = tokenizer if tokenizer is not None else object()

    monkeypatch.setattr(actors, "HFActor", StubHF)
    monkeypatch.setattr(actors, "check_actor", lambda config: None)
    _, given = _record_scheduled_tasks(monkeypatch)
    evaluate(
        EvaluateConfig(
            data="helpdp/data/real-actor",
            seeds=[100],
            splits=["test"],
            random_p=[],
            out=str(tmp_path / "e"),
            progress=False,
            ope=False,
            skip=[
                "random episodes p=0.5",
                "rule: after failure",
                "rule: turn 0 + after failure",
                "dp table (budget 1)",
            ],
            reuse=False,
        )
    )
    assert len(given) == 3  # never, always, turn 0
    assert loads == [True, False, False, False]  # one load, then a fresh actor per run
    assert len({id(a) for a in given}) == 3 and len({id(a.model) for a in given}) == 1


def test_summary_sr_interval_is_wilson_and_stays_inside_0_1():
    """SR's interval is the Wilson score interval: 3 of 4 gives [0.301, 0.954] (by hand:
    centre (0.75 + 0.9604) / 1.9604, half 1.96 sqrt(0.046875 + 0.0600) / 1.9604); 4 of 4
    reaches 1.0 and no further (the normal interval had zero width there)."""
    s = summarize(pd.concat([_runs("a", [1, 1, 1, 0], 0), _runs("b", [1, 1, 1, 1], 0)]))
    a, b = s.set_index("policy").loc["a"], s.set_index("policy").loc["b"]
    assert (a["SR_lo"], a["SR_hi"]) == pytest.approx((0.30064, 0.95441), abs=1e-5)
    assert b["SR_hi"] == 1.0 and b["SR_lo"] == pytest.approx(0.51009, abs=1e-5)
    assert "SR_ci" not in s


def test_evaluate_hands_the_collector_a_typed_config_and_prints_what_it_wrote(
    tmp_path, monkeypatch, capsys
):
    """The collector gets a CollectConfig (the data's recorded config, re-aimed field by
    field), the DP's table is built in memory (its search output is still written), and
    the printed report is the report.md written."""
    import dataclasses

    import collect.collector as collector
    from collect.config import CollectConfig
    from helpdp.evaluate import EvaluateConfig, run_evaluate
    from helpdp.policies import TablePolicy

    given = []

    def fake_collect(config, help_policy=None):
        given.append((config, help_policy))
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(
            {
                "task_id": ["smart_home_1/2"],
                "seed": [100],
                "success": [True],
                "outcome": ["complete"],
                "expert_calls": [0],
                "steps": [3],
                "policy_errors": [0],
                "format_errors": [0],
                "errors": [0],
                "blind_calls": [0],
                "recovery_calls": [0],
            }
        ).to_parquet(out / "episodes.parquet")

    monkeypatch.setattr(collector, "collect", fake_collect)
    monkeypatch.setattr(TablePolicy, "load", None)  # nothing written is read back
    cfg = EvaluateConfig(
        seeds=[100],
        splits=["test"],
        random_p=[],
        out=str(tmp_path),
        baselines=False,
        progress=False,
        ope=False,
        batch_size=3,
    )
    res = run_evaluate(cfg)
    ((config, pol),) = given
    assert isinstance(config, CollectConfig) and dataclasses.is_dataclass(config.schedule)
    assert (config.schedule.seeds, config.schedule.splits) == ([100], ["test"])
    assert config.schedule.probabilities == [0.0] and config.policy is None
    assert (config.executor.workers, config.executor.batch_size) == (1, 3)
    assert config.worlds is None and config.split.test == 0.0 and config.split.test_tasks
    assert pol.search["budget"] == 1.0 and (tmp_path / "dp_search" / "search.json").is_file()
    printed = capsys.readouterr().out
    assert res.report == (tmp_path / "report.md").read_text() and res.report in printed


def test_a_skipped_table_at_an_unreachable_budget_does_not_stop_the_evaluation(
    tmp_path, monkeypatch
):
    """Data where some states were only ever observed with help (stage 2's turn 0) have
    no DP table below that usage: skipped, the table is left out and the other policies
    run; asked for, the error says how to skip it."""
    import helpdp.evaluate.harness as harness
    from helpdp import InfeasibleBudget, demo_dataset_path, load_dataset
    from helpdp.evaluate import EvaluateConfig
    from helpdp.evaluate.report import report

    def infeasible(*a, **k):
        raise InfeasibleBudget("budget 1 is below the least expert usage any policy reaches")

    monkeypatch.setattr(harness, "_dp_table", infeasible)
    ds = load_dataset(demo_dataset_path())
    cfg = EvaluateConfig(budget=1.0, random_p=[], skip=["dp table (budget 1)"])
    pols, table, _ = harness._policies(cfg, ds, [], tmp_path)
    assert table is None and "dp table (budget 1)" not in {p.name for p in pols}
    assert {"never", "always", "rule: turn 0"} <= {p.name for p in pols}
    summary = pd.DataFrame(columns=["split"])
    assert "no policy of the data reaches this budget" in report(summary, [], None, cfg, 1.0, 0)
    with pytest.raises(ValueError, match=r"skip=\['dp table \(budget 1\)'\]"):
        harness._policies(EvaluateConfig(budget=1.0, random_p=[]), ds, [], tmp_path)


def test_the_rules_hull_at_equal_spend_by_hand():
    """Rules at (U, SR): never (0, 0), turn 0 (1, .5), turns 0,1 (2, .75), always (3, .75):
    always gains nothing over turns 0,1, so the hull is never - turn 0 - turns 0,1. A
    policy at 1.5 calls meets the half-and-half mixture of turn 0 and turns 0,1, pair by
    pair; at exactly 1 call, turn 0 itself; beyond 2 calls, nothing (always buys nothing)."""
    from helpdp.evaluate import rule_hull_baseline

    frames = {
        "never": _runs("never", [0, 0, 0, 0], [0, 0, 0, 0]),
        "rule: turn 0": _runs("rule: turn 0", [1, 1, 0, 0], [1, 1, 1, 1]),
        "rule: turns 0,1": _runs("rule: turns 0,1", [1, 1, 1, 0], [2, 2, 2, 2]),
        "always": _runs("always", [1, 1, 1, 0], [3, 3, 3, 3]),
    }
    frames = {k: f.set_index("pair") for k, f in frames.items()}
    base, how = rule_hull_baseline(1.5, frames)
    assert base.tolist() == [1.0, 1.0, 0.5, 0.0] and how == (
        "rule: turn 0 / rule: turns 0,1 mixed 0.50/0.50"
    )
    base, how = rule_hull_baseline(1.0, frames)
    assert base.tolist() == [1.0, 1.0, 0.0, 0.0] and how == "rule: turn 0"
    assert rule_hull_baseline(0.5, frames)[0].tolist() == [0.5, 0.5, 0.0, 0.0]
    assert rule_hull_baseline(2.5, frames) is None
    # in compare: the policy at 1.5 calls, succeeding everywhere, is +0.375 over the mix
    r = pd.concat([f.reset_index() for f in frames.values()])
    smart = _runs("smart", [1, 1, 1, 1], [1, 2, 1, 2])
    c = compare(pd.concat([r, smart]), "smart", "test", [])
    assert c["vs_rules_equal_spend"][0] == pytest.approx(0.375)
    assert c["rules_equal_spend"].endswith("mixed 0.50/0.50")


def test_detectable_difference_and_pairs_needed_invert_each_other():
    """(1.96 + 0.8416) sd / sqrt(n): sd 0.5, 100 pairs -> 0.140; 0.05 needs 785 pairs."""
    from helpdp.intervals import detectable_difference, pairs_needed

    z = 1.959964 + 0.841621
    assert detectable_difference(0.5, 100) == pytest.approx(z * 0.05, rel=1e-5)
    assert pairs_needed(0.5, 0.05) == 785 and pairs_needed(0.5, 0.14) == 101
    assert detectable_difference(0.5, pairs_needed(0.5, 0.05)) <= 0.05
    assert detectable_difference(0.5, 0) == float("inf")


def test_the_report_names_the_tables_budget_and_the_helpers():
    """The report's first line said "Budget 1" when the helper ran at several budgets:
    it names the DP table's budget and, with a helper, the helper's budgets."""
    from helpdp.evaluate import EvaluateConfig
    from helpdp.evaluate.report import report

    summary = pd.DataFrame(columns=["split"])
    cfg = EvaluateConfig(budget=1.0, random_p=[], seeds=[0, 1, 2])
    assert "The DP table's budget 1; seeds 0..2 (3)" in report(summary, [], None, cfg, 1.0, 0)
    cfg = EvaluateConfig(budget=1.0, random_p=[], seeds=[0, 1, 2], helper_dir="H",
                         helper_budgets=[0.5, 1, 2])  # fmt: skip
    head = report(summary, [], None, cfg, 1.0, 0)
    assert "The DP table's budget 1 (the helper's: 0.5, 1, 2); seeds" in head


def test_the_headroom_row_says_why_one_seed_has_no_cross_fitted_value():
    # chosen on even seeds and measured on odd ones: one seed printed "nan (nan)"
    from helpdp.evaluate.report import headroom_report

    rooms = [{"split": "test", "budget": 1.0, "crossfit": (float("nan"), float("nan")),
              "insample": (0.5, 1.0)}]  # fmt: skip
    text = headroom_report(rooms)
    assert "| test | 1 | n/a (needs 2 seeds or more) | 0.500 (1.00) |" in text and "nan" not in text
