"""The collection schedule: counts per task/probability/seed, splits, draws, determinism."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from collect.schedule import (
    EpisodeSpec,
    ScheduleConfig,
    SplitConfig,
    Stage2Config,
    build_schedule,
    design_spec,
    draw_action,
    episode_rng,
    shard_episodes,
    split_tasks,
    stage2_design,
    trigger_vectors,
)

TASKS = [(s, i) for s in ("alpha_1", "beta_1") for i in range(5)]
PAPER = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


def test_paper_schedule_counts():
    specs = build_schedule(TASKS, 1, ScheduleConfig(), SplitConfig())
    assert len(specs) == len(TASKS) * 7 * 3
    per_task_p = collections.Counter((s.task_id, s.trigger_p) for s in specs)
    assert set(per_task_p.values()) == {3}
    assert {p for _, (p,) in per_task_p} == set(PAPER)
    per_task_seed = collections.Counter((s.task_id, s.seed) for s in specs)
    assert set(per_task_seed.values()) == {7}
    assert {s.seed for s in specs} == {0, 1, 2}
    assert len({s.episode_id for s in specs}) == len(specs)
    assert len({s.entropy for s in specs}) == len(specs)


def test_schedule_is_deterministic_and_seeded():
    a = build_schedule(TASKS, 1, ScheduleConfig(), SplitConfig())
    b = build_schedule(list(TASKS), 1, ScheduleConfig(), SplitConfig())
    assert a == b
    # an episode's id and seed do not depend on which other tasks are scheduled
    c = build_schedule(TASKS[3:], 1, ScheduleConfig(), SplitConfig(validation=0, test=0))
    by_key = {(s.task_id, s.trigger_p, s.seed): (s.episode_id, s.entropy) for s in a}
    assert all(by_key[(s.task_id, s.trigger_p, s.seed)] == (s.episode_id, s.entropy) for s in c)
    other = build_schedule(TASKS, 1, ScheduleConfig(seed=1), SplitConfig())
    assert {s.episode_id for s in other}.isdisjoint({s.episode_id for s in a})
    assert EpisodeSpec.from_dict(a[5].as_dict()) == a[5]


def test_pairs_for_two_interventions():
    assert trigger_vectors([0.1, 0.3], 2) == [(0.1, 0.1), (0.3, 0.3)]
    assert trigger_vectors([[0.1, 0.0], [0.0, 0.1]], 2) == [(0.1, 0.0), (0.0, 0.1)]
    specs = build_schedule(TASKS, 2, ScheduleConfig(), SplitConfig())
    assert {s.trigger_p for s in specs} == {(p, p) for p in PAPER}
    with pytest.raises(ValueError, match="2 interventions"):
        trigger_vectors([[0.1, 0.2, 0.3]], 2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        trigger_vectors([1.5], 1)
    with pytest.raises(ValueError, match="repeated"):
        trigger_vectors([0.5, 0.5], 1)
    with pytest.raises(ValueError, match="repeated seeds"):
        build_schedule(TASKS, 1, ScheduleConfig(seeds=[1, 1]), SplitConfig())


def test_splits_are_by_task_exact_and_forced():
    ids = [f"s/{i}" for i in range(20)]
    split = split_tasks(ids, SplitConfig(validation=0.2, test=0.25))
    counts = collections.Counter(split.values())
    assert counts == {"train": 11, "validation": 4, "test": 5}
    assert split == split_tasks(list(reversed(ids)), SplitConfig(validation=0.2, test=0.25))
    forced = split_tasks(ids, SplitConfig(test_tasks=["s/0"], validation_tasks=["s/1"]))
    assert forced["s/0"] == "test" and forced["s/1"] == "validation"
    assert collections.Counter(forced.values()) == {"train": 12, "validation": 4, "test": 4}
    specs = build_schedule(TASKS, 1, ScheduleConfig(splits=["test"]), SplitConfig(test=0.2))
    assert {s.split for s in specs} == {"test"} and len({s.task_id for s in specs}) == 2
    # every episode of a task has the task's split
    specs = build_schedule(TASKS, 1, ScheduleConfig(), SplitConfig())
    assert all(len(v) == 1 for v in _group(specs, "task_id", "split").values())


def _group(specs, key, value):
    out = collections.defaultdict(set)
    for s in specs:
        out[getattr(s, key)].add(getattr(s, value))
    return out


def test_draw_action_rates_and_availability():
    spec = build_schedule(TASKS[:1], 1, ScheduleConfig(probabilities=[0.3]), SplitConfig())[0]
    draws = [draw_action(episode_rng(spec, "trigger", t), (0.3,), (True,)) for t in range(4000)]
    assert abs(np.mean(draws) - 0.3) < 0.03
    assert [draw_action(episode_rng(spec, "trigger", t), (0.0,), (True,)) for t in range(200)] == [
        0
    ] * 200
    assert [draw_action(episode_rng(spec, "trigger", t), (1.0,), (True,)) for t in range(200)] == [
        1
    ] * 200
    assert [draw_action(episode_rng(spec, "trigger", t), (1.0,), (False,)) for t in range(50)] == [
        0
    ] * 50
    # the same (episode, turn) always gives the same draw; streams are independent
    again = [draw_action(episode_rng(spec, "trigger", t), (0.3,), (True,)) for t in range(4000)]
    assert again == draws
    a = episode_rng(spec, "trigger", 3).random()
    assert a == episode_rng(spec, "trigger", 3).random() != episode_rng(spec, "actor", 3).random()
    # two interventions at .5/.5: each fires alone or wins a tie; nohelp ~ (1 - .5)^2
    two = [
        draw_action(episode_rng(spec, "trigger", t), (0.5, 0.5), (True, True)) for t in range(4000)
    ]
    freq = np.bincount(two, minlength=3) / len(two)
    assert abs(freq[0] - 0.25) < 0.03 and abs(freq[1] - freq[2]) < 0.05


def test_shards_cover_the_schedule_in_order():
    specs = build_schedule(TASKS, 1, ScheduleConfig(), SplitConfig())
    shards = shard_episodes(specs, 16)
    assert [s for sh in shards for s in sh] == specs
    assert all(len(sh) == 16 for sh in shards[:-1]) and 1 <= len(shards[-1]) <= 16
    with pytest.raises(ValueError):
        shard_episodes(specs, 0)


def test_stage2_runs_each_task_once_per_seed_under_its_design():
    design = stage2_design(Stage2Config("turn0", ["repeat", "turn:2"], 0.25), seed=0)
    assert stage2_design(Stage2Config(), seed=0) is None  # the default: the grid
    sched = ScheduleConfig(seeds=[10, 11])
    specs = build_schedule(TASKS, 2, sched, SplitConfig(), design)
    assert len(specs) == len(TASKS) * 2
    assert {s.trigger_p for s in specs} == {(0.25, 0.0)}  # q for the first intervention
    assert collections.Counter((s.task_id, s.seed) for s in specs).most_common(1)[0][1] == 1
    grid = build_schedule(TASKS, 2, sched, SplitConfig())
    assert not {s.episode_id for s in specs} & {s.episode_id for s in grid}
    other = stage2_design(Stage2Config("turn0", ["repeat", "turn:2"], 0.5), seed=0)
    assert not {s.episode_id for s in specs} & {
        s.episode_id for s in build_schedule(TASKS, 2, sched, SplitConfig(), other)
    }  # another design, other episodes
    assert design_spec(design) == (
        '{"base":"turn0","events":["repeat","turn:2"],"kind":"triggers","q":0.25,"seed":0}'
    )


def test_the_grid_records_no_stage2_and_stage2_records_its_design():
    from collect.config import collect_config, source_config
    from collect.plan import fingerprint_config

    grid = collect_config(["out=x"])
    assert "stage2" not in source_config(grid) and "stage2" not in fingerprint_config(grid)
    s2 = collect_config(["out=x", "stage2.base=turn0", "stage2.q=0.3"])
    assert source_config(s2)["stage2"] == {
        "base": "turn0",
        "events": ["repeat", "failed", "unknown_tool"],
        "q": 0.3,
    }


def test_a_tasks_split_does_not_depend_on_which_tasks_run():
    """The split ranks the whole pool of the worlds' tasks: a schedule that runs a few of
    them puts each where the full schedule does (ranked among the selected tasks alone,
    ``beta_1/2`` would move from train to validation here)."""
    pool = [f"{s}/{i}" for s, i in TASKS]
    full = {s.task_id: s.split for s in build_schedule(TASKS, 1, ScheduleConfig(), SplitConfig())}
    few = TASKS[5:8]
    alone = {s.task_id: s.split for s in build_schedule(few, 1, ScheduleConfig(), SplitConfig())}
    pooled = {
        s.task_id: s.split
        for s in build_schedule(few, 1, ScheduleConfig(), SplitConfig(), None, pool)
    }
    assert pooled == {t: full[t] for t in pooled}
    assert alone != pooled  # the old rule: the split moved with the selection
    with pytest.raises(ValueError, match="task 'alpha_1/0' is not in the pool"):
        build_schedule(TASKS[:1], 1, ScheduleConfig(), SplitConfig(), None, pool[5:])


def test_task_ids_filter_the_plan_and_leave_unfiltered_plans_as_they_were():
    """``schedule.task_ids`` runs only the tasks named (a split chosen by world runs a
    few tasks of many worlds); without it the recorded config and the fingerprint are
    those of the plan before the field existed; a bad id is one error naming it."""
    from collect.config import collect_config, source_config
    from collect.plan import plan_shards

    base = ["out=x", "schedule.scenarios=[smart_home_1,e_commerce_admin_1]", "schedule.seeds=[0]"]
    base += ["schedule.probabilities=[0.0]", "schedule.splits=[train,validation,test]"]
    every = plan_shards(collect_config(base))
    assert "task_ids" not in source_config(collect_config(base))["schedule"]
    wanted = ["smart_home_1/2", "e_commerce_admin_1/0"]
    few = plan_shards(collect_config([*base, f"schedule.task_ids=[{','.join(wanted)}]"]))
    assert sorted(s.task_id for s in few.specs) == sorted(wanted)
    assert few.config["schedule"]["task_ids"] == wanted
    assert few.fingerprint != every.fingerprint
    # a task keeps its split whatever the filter (the pool is every task of the worlds)
    split = {s.task_id: s.split for s in every.specs}
    assert {s.task_id: s.split for s in few.specs} == {t: split[t] for t in wanted}
    for bad, why in (
        ("smart_home_1", "is not a task id"),
        ("nowhere_1/0", "no scenario 'nowhere_1'"),
        ("smart_home_1/999", "smart_home_1 has no task 999"),
        ("workflow_automation_1/0", "outside schedule.scenarios"),
    ):
        with pytest.raises(ValueError, match=f"schedule.task_ids: '{bad}'.*{why}"):
            plan_shards(collect_config([*base, f"schedule.task_ids=[{bad}]"]))
