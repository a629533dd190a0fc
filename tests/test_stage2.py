"""Stage 2 of the two-stage design end to end (collect/schedule.py ``stage2``): a base
policy randomised only at trigger states, collected with the simulated actor on the demo
worlds; every step's logged ``p_help`` is the design's, help is drawn only at trigger
states, ``collect.merge`` joins it with a grid collection of the same tasks, and
trajectory IS on the merge equals the hand computation of the mixture weights."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from collect.collector import collect, collect_config
from collect.merge import merge_collections
from helpdp import load_dataset
from helpdp.ope import estimate, load_logged
from helpdp.policies import action_probs, build_policy

Q = 0.5
EVENTS = ["failed", "unknown_tool", "format_error", "turn:1"]
COMMON = [
    "state_key=db",
    "progress=false",
    "schedule.scenarios=[e_commerce_admin_1]",
    "schedule.max_tasks=2",
]
STAGE2 = [
    "stage2.base=never",
    f"stage2.events=[{','.join(EVENTS)}]",
    f"stage2.q={Q}",
    "schedule.seeds=[100,101,102,103]",
]
GRID = ["schedule.probabilities=[0.0,0.5,1.0]", "schedule.seeds=[0,1]"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("stage2")
    grid = collect(collect_config([f"out={root / 'grid'}", *COMMON, *GRID])).out
    s2 = collect(collect_config([f"out={root / 's2'}", *COMMON, *STAGE2])).out
    merged = merge_collections([grid, s2], root / "merged")
    return {"grid": grid, "s2": s2, "merged": merged}


def _triggers(steps: pd.DataFrame) -> np.ndarray:
    """The trigger states of EVENTS by hand from the raw steps: turn 1, or the previous
    turn failed (tool error, bad arguments, server), called an unknown tool or was not
    a well-formed turn."""
    st = steps.sort_values(["episode_id", "t"]).reset_index(drop=True)
    same = st["episode_id"].eq(st["episode_id"].shift(1))
    fail = st["failure"].shift(1).where(same)
    bad_format = fail.isin(
        ["invalid_json", "malformed_tag", "untagged_call", "unknown_meta_function"]
    ) | (
        same
        & (
            st["format_error"].shift(1, fill_value=False).astype(bool)
            | (st["kind"].shift(1).isin(["invalid", "error"]) & fail.isna())
        )
    )
    failed = fail.isin(["tool_error", "invalid_arguments", "server_error", "unknown_tool"])
    return ((st["t"] == 1) | failed | bad_format).to_numpy()


def test_stage2_logs_the_design_and_draws_only_at_triggers(runs):
    ds = load_dataset(runs["s2"])
    ep, st = ds.episodes, ds.steps.sort_values(["episode_id", "t"]).reset_index(drop=True)
    assert len(ep) == 2 * 4  # one episode per (task, seed), no grid
    (design,) = ep["design"].unique()
    spec = json.loads(design)
    assert spec == {"kind": "triggers", "base": "never", "events": EVENTS, "q": Q, "seed": 0}
    assert (ep["trigger_p"] == Q).all() and (ep["p_oracle"] == Q).all()
    assert st["args_sha"].str.fullmatch(r"[0-9a-f]{16}").all()
    logged = load_logged(runs["s2"])  # refuses a p_help that disagrees with the design
    views = logged.views()
    probs = action_probs(build_policy(spec), views, 2)[:, 1]
    np.testing.assert_array_equal(logged.steps["p_help"].to_numpy(), probs)
    trig = _triggers(st)
    assert trig.sum() >= 5 and (~trig).sum() >= 5
    # trigger states: help with probability q; elsewhere the base (never): no help
    np.testing.assert_array_equal(st["p_help"].to_numpy(), np.where(trig, Q, 0.0))
    assert (st["action"].to_numpy()[~trig] == 0).all()
    assert 0 < st["action"].to_numpy()[trig].sum() < trig.sum()


def test_the_grid_writes_no_stage2_columns_and_the_merge_nulls_them(runs):
    grid = load_dataset(runs["grid"])
    assert "design" not in grid.episodes and not {"p_help", "args_sha"} & set(grid.steps)
    assert "stage2" not in grid.manifest["source"]["config"]
    m = load_dataset(runs["merged"])
    n_grid = len(grid.episodes)
    assert len(m.episodes) == n_grid + 8
    assert m.episodes["design"].isna().sum() == n_grid
    is_grid = m.steps["episode_id"].isin(grid.episodes["episode_id"])
    assert m.steps.loc[is_grid, "p_help"].isna().all()
    assert m.steps.loc[~is_grid, "p_help"].notna().all()
    # the tasks are shared: one row per state, the transitions' counts add up
    assert not m.states["state_id"].duplicated().any()
    assert int(m.transitions["count"].sum()) == len(m.steps)
    src = m.manifest["source"]
    assert "stage2" not in src["config"]
    assert src["merged_from"][1]["stage2"]["base"] == "never"
    logged = load_logged(runs["merged"])
    assert len(logged.designs) == 1 and logged.vectors.reshape(-1).tolist() == [0.0, 0.5, 1.0]


def test_is_on_the_merge_is_the_hand_computed_mixture(runs):
    """IS of "help at turn 1", which differs from the base (never) only at a trigger
    state (turn:1), against its hand computation: per task, each episode's weight is
    pi(episode) / sum over the task's designs of share x mu(episode)."""
    m = load_dataset(runs["merged"])
    ep, st = m.episodes, m.steps.sort_values(["episode_id", "t"]).reset_index(drop=True)
    trig = _triggers(st)
    a, t = st["action"].to_numpy(), st["t"].to_numpy()
    pi = np.where(a == (t == 1), 1.0, 0.0)
    mu_grid = {v: np.where(a == 1, v, 1 - v) for v in (0.0, 0.5, 1.0)}
    mu_design = np.where(trig, Q, np.where(a == 0, 1.0, 0.0))  # never, q at triggers
    per_task = []
    for _, e_task in ep.groupby("task_id"):
        shares = {
            ("d" if d else v): n / len(e_task)
            for (d, v), n in e_task.assign(d=e_task["design"].notna())
            .groupby(["d", "trigger_p"])
            .size()
            .items()
        }
        vals = []
        for _, e in e_task.iterrows():
            rows = (st["episode_id"] == e["episode_id"]).to_numpy()
            mix = sum(
                s * np.prod((mu_design if k == "d" else mu_grid[k])[rows])
                for k, s in shares.items()
            )
            vals.append(np.prod(pi[rows]) / mix * float(e["success"]))
        per_task.append(np.mean(vals))
    hand = float(np.mean(per_task))
    got = estimate(
        build_policy("turns:1"), runs["merged"], estimators=("is",), unit="episode", n_boot=10
    )
    assert got.get("is", "SR")[0] == pytest.approx(hand, rel=1e-12, abs=1e-12)
    assert hand > 0  # some episodes agree with the rule


def test_stage2_options_are_checked_before_anything_runs(tmp_path):
    from collect.config import validate

    def cfg(*extra):
        return collect_config([f"out={tmp_path / 'x'}", *extra])

    with pytest.raises(ValueError, match="stage2: policy 'bogus'"):
        validate(cfg("stage2.base=bogus"))
    with pytest.raises(ValueError, match=r"stage2.q must lie in \[0, 1\]"):
        validate(cfg("stage2.base=turn0", "stage2.q=1.5"))
    with pytest.raises(ValueError, match="stage2: .*event"):
        validate(cfg("stage2.base=turn0", "stage2.events=[sometimes]"))
    with pytest.raises(ValueError, match="mixes per episode"):
        validate(cfg("stage2.base=random_episodes:0.3"))
    with pytest.raises(ValueError, match="stage2.base and policy exclude each other"):
        validate(cfg("stage2.base=turn0", "policy=turn0"))


def test_a_stage2_collection_twice_is_refused_by_episode(runs, tmp_path):
    from helpdp.data import DatasetError

    with pytest.raises(DatasetError, match=r"s2/episodes.parquet: episode_id -?\d+ is also in s2"):
        merge_collections([runs["s2"], runs["s2"]], tmp_path / "twice")
    assert not (tmp_path / "twice").exists()


# -- stage2.max_randomised: randomise only at the first K trigger states ------------------

CAP_EVENTS = ("failed", "unknown_tool", "repeat")


def _hand_episode() -> pd.DataFrame:
    """One episode, 6 turns: failed, working, the same call again (a repeat), an unknown
    tool, a failed call, the answer. Its states' events (before each turn): s0 none;
    s1 failed (trigger 1); s2 working (none); s3 a repeat (trigger 2); s4 unknown tool
    (trigger 3); s5 failed (trigger 4)."""
    rows = [
        ("call_tool", "a", "tool_error", "x"),
        ("call_tool", "b", None, "y"),
        ("call_tool", "b", None, "y"),
        ("call_tool", "zz", "unknown_tool", "z"),
        ("call_tool", "c", "invalid_arguments", "w"),
        ("final", None, None, None),
    ]
    return pd.DataFrame(
        [(7, t, k, tool, f, False, sha) for t, (k, tool, f, sha) in enumerate(rows)],
        columns=["episode_id", "t", "kind", "tool_name", "failure", "format_error", "args_sha"],
    )


def test_first_k_trigger_states_are_randomised_and_the_base_decides_after():
    from helpdp.events import count_fired, state_events, state_histories
    from helpdp.policies import StateView, TriggerRandomised

    ev = state_events(_hand_episode())
    past = state_histories(ev["last_class"], ev["last_repeats"], [-1] * 6, np.array([0, 6]))
    assert past[3] == ((None, 0, None), ("failed", 0, None), ("working", 0, None))
    views = [
        StateView(t, "w/0", t, "", episode_id=7, last_class=lc, repeats=int(r), past=p)
        for t, (lc, r, p) in enumerate(zip(ev["last_class"], ev["last_repeats"], past))
    ]
    assert [count_fired(CAP_EVENTS, v.past) for v in views] == [0, 0, 1, 1, 2, 3]
    q = 0.3
    capped = TriggerRandomised("turn0", CAP_EVENTS, q, max_randomised=2)
    every = TriggerRandomised("turn0", CAP_EVENTS, q)
    assert capped.at_trigger(views).tolist() == [False, True, False, True, True, True]
    # P(help): turn 0 by the base (1); q at triggers 1 and 2 (s1, s3); the base (0) after
    assert action_probs(capped, views, 2)[:, 1].tolist() == [1.0, q, 0.0, q, 0.0, 0.0]
    assert action_probs(every, views, 2)[:, 1].tolist() == [1.0, q, 0.0, q, q, q]
    one = TriggerRandomised("turn0", CAP_EVENTS, q, max_randomised=1)
    assert action_probs(one, views, 2)[:, 1].tolist() == [1.0, q, 0.0, 0.0, 0.0, 0.0]
    # decide agrees: the draws where randomised, the base's decision after
    for seed in range(40):
        c = TriggerRandomised("turn0", CAP_EVENTS, q, seed=seed, max_randomised=2)
        e = TriggerRandomised("turn0", CAP_EVENTS, q, seed=seed)
        got, drawn = c.decide(views), e.decide(views)
        assert got[[0, 1, 2, 3]].tolist() == drawn[[0, 1, 2, 3]].tolist()
        assert got[[4, 5]].tolist() == [0, 0]
    # the spec carries K (without it, K = null); a view without its history is refused
    assert capped.spec()["max_randomised"] == 2 and "max_randomised" not in every.spec()
    assert build_policy(capped.spec()).max_randomised == 2
    assert build_policy(every.spec()).max_randomised is None
    with pytest.raises(ValueError, match="carries 0 earlier states"):
        capped.decide([StateView(5, "w/0", 5, "", last_class="failed")])
    with pytest.raises(ValueError, match="max_randomised must be >= 1"):
        TriggerRandomised("turn0", CAP_EVENTS, q, max_randomised=0)


SIM = [
    "collect/actor=simulated_real",
    "state_key=db",
    "progress=false",
    "schedule.scenarios=[e_commerce_admin_1]",
    "schedule.max_tasks=3",
]
SIM_EVENTS = "[repeat,failed,unknown_tool,turn:2]"


def _seeds(a: int, b: int) -> str:
    return f"schedule.seeds=[{','.join(map(str, range(a, b)))}]"


#: help at turn 0 and at the first two trigger states: inside the K = 2 design's support
CANDIDATE = "turn0+after:repeat,failed,unknown_tool,turn:2+max:3"


@pytest.mark.slow
def test_capped_design_on_the_simulated_real_agent(tmp_path):
    """Stage 2 with K = 2 on the agent fitted to the real model: the collector's logged
    p_help equals the design's recomputation from the data (load_logged checks every
    row), the candidate's importance weights are at most 1 / 0.5^2 = 4 (uncapped, the
    same episodes' behaviour would weight up to 2^k), and its OPE interval covers its
    value measured in the environments (other seeds)."""
    s2 = collect(
        collect_config(
            [
                f"out={tmp_path / 's2'}",
                *SIM,
                "stage2.base=turn0",
                f"stage2.events={SIM_EVENTS}",
                "stage2.q=0.5",
                "stage2.max_randomised=2",
                _seeds(0, 60),
            ]
        )
    ).out
    ds = load_dataset(s2)
    assert json.loads(ds.episodes["design"].iloc[0])["max_randomised"] == 2
    assert ds.manifest["source"]["config"]["stage2"]["max_randomised"] == 2
    logged = load_logged(s2)
    views, a = logged.views(), logged.steps["action"].to_numpy(np.int64)
    ep_of = np.repeat(np.arange(logged.n_episodes), np.diff(logged.ep_ptr))

    def per_episode(p):
        out = np.ones(logged.n_episodes)
        np.multiply.at(out, ep_of, p)
        return out

    pi = per_episode(action_probs(build_policy(CANDIDATE), views, 2)[np.arange(len(a)), a])
    mu = per_episode(logged.mu[:, 0])
    w = pi / mu
    assert w.max() == 4.0 and (w == 4.0).sum() >= 5 and (w > 0).sum() >= 40
    spec = json.loads(ds.episodes["design"].iloc[0])
    spec.pop("max_randomised")
    every = action_probs(build_policy(spec), views, 2)[np.arange(len(a)), a]
    assert (1.0 / per_episode(every)).max() >= 16.0  # the uncapped design on these episodes

    truth = load_dataset(
        collect(
            collect_config(
                [f"out={tmp_path / 'truth'}", *SIM, f"policy='{CANDIDATE}'", _seeds(200, 260)]
            )
        ).out
    ).episodes
    est = estimate(build_policy(CANDIDATE), s2, estimators=("wdr",), n_boot=200)
    for name, value in (("SR", truth["success"].mean()), ("U", truth["expert_calls"].mean())):
        _, lo, hi = est.get("wdr", name)
        assert lo <= value <= hi, (name, lo, value, hi)


def test_an_evaluation_of_stage2_data_runs_the_policies_not_the_design(runs, tmp_path):
    """``helpdp.evaluate`` re-aims the data's own collection config: a stage-2 dataset's
    design must not come with it (it would replace every evaluated policy), and the
    collector refuses a help policy beside a stage-2 design rather than drop one."""
    from helpdp.evaluate.config import EvaluateConfig
    from helpdp.evaluate.harness import recorded_config, rerun_config

    recorded = recorded_config(load_dataset(runs["s2"]).manifest)
    assert recorded.stage2.base == "never"
    assert rerun_config(recorded, EvaluateConfig(), 1).stage2.base is None
    cfg = collect_config([f"out={tmp_path / 'both'}", *COMMON, *STAGE2])
    with pytest.raises(ValueError, match="stage2.base and a help policy exclude each other"):
        collect(cfg, help_policy=build_policy("always"))
    assert not (tmp_path / "both" / "episodes.parquet").exists()


def test_the_two_stages_on_tasks_named_by_id_merge_and_keep_their_filter(tmp_path):
    """The generated benchmark's train candidates are named by id
    (``schedule.task_ids``): both stages run only those, and their merge records the
    union of the ids (a source without the filter makes it null: every task)."""
    ids = ["e_commerce_admin_1/1", "e_commerce_admin_1/3"]
    named = [*COMMON[:3], f"schedule.task_ids=[{','.join(ids)}]"]
    grid = collect(
        collect_config([f"out={tmp_path / 'g'}", *named, "schedule.probabilities=[0.0,1.0]"])
    ).out
    s2 = collect(
        collect_config([f"out={tmp_path / 's'}", *named, *STAGE2[:3], "schedule.seeds=[100]"])
    ).out
    m = load_dataset(merge_collections([grid, s2], tmp_path / "m"))
    assert sorted(pd.unique(m.episodes["task_id"])) == ids
    assert m.manifest["source"]["config"]["schedule"]["task_ids"] == ids
    assert len(m.episodes) == 2 * 2 * 3 + 2  # the grid: 2 tasks x 2 p x 3 seeds; stage 2: 1 seed
