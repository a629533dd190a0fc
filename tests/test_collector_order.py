"""``executor.order``: the order the shards run in, never what they hold. ``seed`` runs
every task's shard of one seed before the next seed's, so a long collection stopped part
way holds about as many episodes of each task; the tables and the fingerprint are the
plan order's."""

from __future__ import annotations

import pytest
from collector_helpers import small_args as _args
from collector_helpers import table_bytes_of as _tables

import collect.collector as collector_mod
from collect.collector import collect, collect_config
from collect.executors import run_order
from collect.plan import plan_shards
from collect.schedule import EpisodeSpec


def _spec(task: str, seed: int) -> EpisodeSpec:
    return EpisodeSpec(
        episode_id=hash((task, seed)),
        scenario=task.split("/")[0],
        task_idx=int(task.split("/")[1]),
        task_id=task,
        split="train",
        seed=seed,
        trigger_p=(0.5,),
        entropy=0,
    )


def test_seed_order_interleaves_the_tasks_and_plan_order_keeps_the_plan():
    # the plan: task by task, seed by seed within a task (shard_size 1)
    shards = [[_spec(t, s)] for t in ("a/0", "a/1", "b/0") for s in (100, 101, 102)]
    todo = list(range(9))
    assert run_order(todo, shards, "plan") == todo
    order = run_order(todo, shards, "seed")
    assert order == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    # any prefix is balanced across the three tasks (at most one apart)
    for k in range(1, 10):
        tasks = [shards[i][0].task_id for i in order[:k]]
        counts = [tasks.count(t) for t in ("a/0", "a/1", "b/0")]
        assert max(counts) - min(counts) <= 1
    # a resumed run orders what is left the same way; a shard of several seeds goes by its
    # smallest
    assert run_order([2, 4, 7], shards, "seed") == [4, 7, 2]
    wide = [[_spec("a/0", 105), _spec("a/0", 101)], [_spec("a/1", 103)]]
    assert run_order([0, 1], wide, "seed") == [0, 1]
    with pytest.raises(ValueError, match="executor.order: unknown order 'random'"):
        run_order(todo, shards, "random")


def test_seed_shuffled_order_is_a_fixed_permutation_of_the_tasks_within_each_seed():
    # 12 tasks x 2 probabilities x 2 seeds, one shard each, planned task by task
    tasks = [f"w{w}/{t}" for w in range(4) for t in range(3)]
    shards = [[_spec(t, s)] for t in tasks for s in (0, 1) for _p in (0, 1)]
    todo = list(range(len(shards)))
    order = run_order(todo, shards, "seed_shuffled")
    assert sorted(order) == todo
    seeds = [shards[i][0].seed for i in order]
    assert seeds == sorted(seeds)  # seed 0's shards all run first
    first = [shards[i][0].task_id for i in order[:24]]
    # a task's two shards of a seed run one after the other, in plan order
    assert all(first[k] == first[k + 1] for k in range(0, 24, 2))
    assert [order[k] < order[k + 1] for k in range(0, 24, 2)] == [True] * 12
    visited = first[::2]
    assert sorted(visited) == sorted(tasks) and visited != tasks  # not the plan's order
    # fixed: a hash of seed and task id, the same on every host and for what is left
    import hashlib

    def key(t: str, s: int) -> str:
        return hashlib.sha256(f"{s}\0{t}".encode()).hexdigest()

    assert visited == sorted(tasks, key=lambda t: key(t, 0))
    left = [i for i in todo if i % 3]
    assert run_order(left, shards, "seed_shuffled") == [i for i in order if i % 3]


def test_helped_first_runs_the_largest_probability_first_then_as_seed_shuffled():
    # 6 tasks x probabilities (0, 1) x seeds (0, 1), one shard each, planned task by task
    tasks = [f"w{w}/{t}" for w in range(3) for t in range(2)]

    def spec(t: str, s: int, p: float) -> EpisodeSpec:
        return EpisodeSpec(hash((t, s, p)), t.split("/")[0], int(t[-1]), t, "train", s, (p,), 0)

    shards = [[spec(t, s, p)] for t in tasks for s in (0, 1) for p in (0.0, 1.0)]
    todo = list(range(len(shards)))
    order = run_order(todo, shards, "helped_first")
    assert sorted(order) == todo
    ps = [shards[i][0].trigger_p[0] for i in order]
    assert ps == [1.0] * 12 + [0.0] * 12
    # within a probability: seed 0's tasks, then seed 1's, each in seed_shuffled's order
    shuffled = run_order(todo, shards, "seed_shuffled")
    for p in (1.0, 0.0):
        assert [i for i in order if shards[i][0].trigger_p[0] == p] == [
            i for i in shuffled if shards[i][0].trigger_p[0] == p
        ]
    # a stage-2 shard goes by the largest probability of its per-turn vector
    vec = [[spec("a/0", 0, 0.0)], [spec("a/1", 0, 0.0)]]
    vec[1][0] = EpisodeSpec(1, "a", 1, "a/1", "train", 0, (0.0, 0.5), 0)
    assert run_order([0, 1], vec, "helped_first") == [1, 0]
    # what is left of a stopped run keeps its order
    left = [i for i in todo if i % 3]
    assert run_order(left, shards, "helped_first") == [i for i in order if i % 3]


def test_seed_order_runs_shards_by_seed_with_the_same_tables_and_fingerprint(tmp_path, monkeypatch):
    # 2 tasks x 2 seeds, one shard each: the plan is (t0 s0, t0 s1, t1 s0, t1 s1)
    extra = ("schedule.probabilities=[0.5]", "schedule.seeds=[0,1]")
    seen: list[list[int]] = []
    real_execute = collector_mod.execute

    def spy(fn, tasks, *a, **kw):
        seen.append([t.index for t in tasks])
        return real_execute(fn, tasks, *a, **kw)

    monkeypatch.setattr(collector_mod, "execute", spy)
    plan_cfg = collect_config(_args(tmp_path / "plan", tmp_path / "work", *extra))
    seed_cfg = collect_config(
        _args(tmp_path / "seed", tmp_path / "work", *extra, "executor.order=seed")
    )
    assert collect(plan_cfg).shards_run == 4
    assert collect(seed_cfg).shards_run == 4
    assert seen == [[0, 1, 2, 3], [0, 2, 1, 3]]
    assert _tables(tmp_path / "plan") == _tables(tmp_path / "seed")
    assert plan_shards(plan_cfg).fingerprint == plan_shards(seed_cfg).fingerprint


def test_an_unknown_order_is_refused_before_anything_runs(tmp_path):
    from collect.config import validate

    cfg = collect_config(_args(tmp_path / "out", tmp_path / "work", "executor.order=random"))
    with pytest.raises(ValueError) as e:
        validate(cfg)
    assert (
        str(e.value)
        == "executor.order must be one of ('plan', 'seed', 'seed_shuffled', 'helped_first'), "
        "got 'random'"
    )
    assert not (tmp_path / "out").exists()


def test_a_scenario_filter_keeps_every_tasks_split():
    """``schedule.scenarios`` and ``schedule.tasks`` select tasks, never move one to another
    split: smart_home_1/1 is a train task of the demo worlds whichever tasks run (ranked
    among the 6 selected tasks alone it was validation)."""
    from collect.plan import plan_episodes

    def splits(*extra):
        cfg = collect_config(["out=/nonexistent", *extra])
        return {s.task_id: s.split for s in plan_episodes(cfg)}

    every = splits("schedule.seeds=[0]", "schedule.probabilities=[0.0]")
    few = splits(
        "schedule.seeds=[0]",
        "schedule.probabilities=[0.0]",
        "schedule.scenarios=[e_commerce_admin_1,smart_home_1]",
        "schedule.tasks=[0,1,2]",
    )
    assert len(every) == 30 and len(few) == 6
    assert few == {t: every[t] for t in few}
    assert few["smart_home_1/1"] == "train" and few["smart_home_1/2"] == "test"


def test_an_unchecked_context_window_is_recorded_as_before_it_and_a_pinned_one_is_planned(
    tmp_path,
):
    """``actor.context_window`` (0: not checked) leaves the plans of collections made before
    it as they were (they resume); a pinned window is part of what the shards hold."""
    from collect.plan import fingerprint_config

    base = _args(tmp_path / "o", tmp_path / "w", "collect/actor=qwen_coder_0_5b_llamacpp")
    unchecked = fingerprint_config(collect_config(base))["actor"]
    pinned = fingerprint_config(collect_config([*base, "actor.context_window=16384"]))["actor"]
    assert "context_window" not in unchecked
    assert pinned.pop("context_window") == 16384 and pinned == unchecked
