"""PRM-threshold help policies (prm.policy) on a tiny LM PRM: state-wise, task-wise,
and the DP table's fallback for unseen states; and their wiring in helpdp.evaluate."""

import numpy as np
import pytest
from prm_helpers import TINY_PRM
from toy_prm import separable_dataset

from helpdp import load_dataset
from helpdp.policies import StateView, TablePolicy
from prm import task_splits
from prm.policy import PRMScorer, TaskPolicy, dataset_views, state_policy
from prm.train import fit_prm

TINY = dict(TINY_PRM)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prmpol")
    ds = load_dataset(separable_dataset(tmp / "data", n_tasks=60))
    prm, _ = fit_prm(ds, {"prm": TINY, "progress": False})
    prm_dir = prm.save(tmp / "prm")
    return ds, PRMScorer.load(prm_dir), prm_dir


def _tasks(ds, split):
    s = task_splits(ds)
    return sorted(s.index[s == split])


def test_scorer_reads_text_and_matches_the_prm(trained):
    ds, scorer, _ = trained
    views = dataset_views(ds, _tasks(ds, "test"))
    visited = set(ds.transitions["state_id"])
    in_test = ds.states["task_id"].isin(_tasks(ds, "test")) & ds.states["state_id"].isin(visited)
    assert [v.state_id for v in views] == sorted(ds.states.loc[in_test, "state_id"])
    p0, p1 = scorer.predict([v.text for v in views])
    sids = [v.state_id for v in views]
    np.testing.assert_allclose(p0, scorer.prm.predict(ds, sids, 0), atol=1e-6)
    np.testing.assert_allclose(p1, scorer.prm.predict(ds, sids, 1), atol=1e-6)
    np.testing.assert_allclose(scorer.score(views, "gain"), p1 - p0)
    np.testing.assert_allclose(scorer.score(views, "risk"), 1 - p0)
    # it reads the lamp on tasks it never saw: low predicted success where it is red
    red = np.array(["lamp red" in v.text for v in views])
    assert p0[red].max() < p0[~red].min()
    with pytest.raises(ValueError, match="score must be"):
        scorer.score(views, "nope")


@pytest.mark.parametrize("q", [0.1, 0.3])
def test_state_policy_helps_at_q_of_validation_states(trained, q):
    ds, scorer, _ = trained
    val = dataset_views(ds, _tasks(ds, "validation"))
    assert len(val) > 20
    for kind in ("gain", "risk"):
        pol = state_policy(scorer, val, q, kind=kind)
        rate = float(pol.decide(val).mean())
        # scores are distinct: the share strictly above the 1 - q quantile
        n = len(val)
        assert rate == pytest.approx((n - 1 - np.floor((1 - q) * (n - 1))) / n), (kind, rate)
        assert abs(rate - q) <= 1 / n
    risk30 = state_policy(scorer, val, 0.3, kind="risk")
    helped = [v for v, a in zip(val, risk30.decide(val)) if a]
    assert helped and all("lamp red" in v.text for v in helped)  # the riskiest states


def test_task_policy_helps_every_turn_of_the_lowest_start_states(trained):
    ds, scorer, _ = trained
    val_tasks = _tasks(ds, "validation")
    starts = dataset_views(ds, val_tasks, start_only=True)
    assert len(starts) == 12
    pol = TaskPolicy.calibrated(scorer, starts, 0.3)
    p0, _ = scorer.predict([v.text for v in starts])
    marked = p0 <= pol.threshold
    assert marked.sum() == int(np.floor(0.3 * (len(starts) - 1))) + 1  # at most the 0.3 quantile
    eps = [StateView(v.state_id, v.task_id, 0, v.text, episode_id=i) for i, v in enumerate(starts)]
    assert pol.decide(eps).astype(bool).tolist() == marked.tolist()
    later = [StateView(0, v.task_id, 1, "anything", episode_id=v.episode_id) for v in eps]
    assert pol.decide(later).astype(bool).tolist() == marked.tolist()  # every turn
    assert pol.decide([StateView(0, "new", 1, "x", episode_id=999)]).tolist() == [0]
    assert pol.unmarked == 1


def test_table_falls_back_to_the_prm_exactly_on_unseen_states(trained, tmp_path):
    from helpdp.budget import search_budget, write_result
    from helpdp.subset import task_subset

    ds, scorer, _ = trained
    sub = task_subset(ds, _tasks(ds, "train"))
    search_dir = write_result(sub, search_budget(sub.mdp, 0.5, gamma=1.0), tmp_path / "dp")
    prm_pol = state_policy(scorer, dataset_views(ds, _tasks(ds, "validation")), 0.3, kind="risk")
    table = TablePolicy.load(search_dir, fallback=prm_pol)
    seen = dataset_views(ds, _tasks(ds, "train"))
    unseen = dataset_views(ds, _tasks(ds, "test"))
    views = seen[:20] + unseen
    acts = table.decide(views)
    assert table.fallback_decisions == len(unseen) and table.known_decisions == 20
    np.testing.assert_array_equal(acts[20:], prm_pol.decide(unseen))
    assert acts[20:].sum() > 0  # the fallback does help somewhere
    pure = TablePolicy.load(search_dir)
    assert pure.decide(unseen).sum() == 0  # the default fallback: nohelp


def test_evaluate_builds_the_prm_policies(trained, tmp_path):
    from helpdp.evaluate.harness import EvaluateConfig, _prm_policies

    ds, _, prm_dir = trained
    cfg = EvaluateConfig(prm_dir=str(prm_dir), table_fallback="prm")
    pols, fallback = _prm_policies(cfg, ds)
    names = [p.name for p in pols]
    assert names == [
        "prm gain top 10% of states",
        "prm gain top 30% of states",
        "prm task-wise lowest 30% of tasks",
    ]
    assert fallback is pols[0]
    assert _prm_policies(EvaluateConfig(), ds) == ([], None)  # default: no PRM, fast
    with pytest.raises(ValueError, match="needs prm_dir"):
        _prm_policies(EvaluateConfig(table_fallback="prm"), ds)
