"""helpdp.ope: intervals across tasks, paired differences, data support, tasks snis drops.

Hand-checkable cases on ``helpdp.synthetic.HelpWorld`` collections; the coverage of the
intervals at the shipped design is ``tests/test_ope_coverage.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from helpdp._src import ope as ko
from helpdp.intervals import in_range
from helpdp.ope import estimate, load_logged, resolve_unit
from helpdp.policies import AtTurns, Never, TurnZero
from helpdp.synthetic import HelpWorld

WORLD = HelpWorld(difficulty=tuple(np.round(np.linspace(0.05, 0.6, 12), 3)))


def test_t_interval_hand_worked():
    m, lo, hi, k = ko.t_interval(np.array([1.0, 2.0, 3.0, 4.0, np.nan]), 0.95)
    half = 3.182446 * np.std([1, 2, 3, 4], ddof=1) / 2  # t_{3, .975} sd / sqrt(4)
    assert (m, k) == (2.5, 4)
    assert lo == pytest.approx(2.5 - half, abs=1e-5) and hi == pytest.approx(2.5 + half, abs=1e-5)
    assert np.isnan(ko.t_interval(np.array([1.0]), 0.95)[1])
    assert ko.differs(
        np.array([0, 2, 3]), np.array([[1, 0], [1, 0], [0, 1]]), np.array([[1, 0], [0, 1], [0, 1]])
    ).tolist() == [True, False]


def test_units_resolve_by_task_count():
    assert resolve_unit("auto", 12) == "task" and resolve_unit("auto", 4) == "episode"
    with pytest.raises(ValueError, match="unit must be one of"):
        resolve_unit("seed", 12)


@pytest.fixture(scope="module")
def logged():
    lg = load_logged(WORLD.collect(seeds=3, seed=7))
    lg.views()
    return lg


def test_task_interval_is_the_t_interval_of_the_per_task_values(logged):
    # per_task's value: the jackknife pseudo-values (their mean is the estimate, their t
    # interval the jackknife's), so select and forecast pool them across folds
    e = estimate(AtTurns((0, 2)), logged, estimators=("dr", "wdr"), reference=TurnZero())
    assert e.unit == "task"
    for est in ("dr", "wdr"):
        for q in ("SR", "U", "dSR"):
            v = e.per_task[(e.per_task["estimator"] == est) & (e.per_task["quantity"] == q)]
            assert len(v) == 12
            m, lo, hi = ko.t_interval(v["value"].to_numpy(), 0.95)[:3]
            assert e.get(est, q) == pytest.approx((m, *in_range(q, lo, hi)))
    # the paired difference is the difference of the two estimates, task by task
    r = estimate(TurnZero(), logged, estimators=("wdr",))
    c = estimate(AtTurns((0, 2)), logged, estimators=("wdr",))
    assert e.get("wdr", "dSR")[0] == pytest.approx(c.get("wdr", "SR")[0] - r.get("wdr", "SR")[0])


def test_task_interval_is_the_jackknife_with_the_model_refitted_without_each_task(logged):
    # by hand: drop each task, estimate again (the control variate refitted on the other
    # eleven), and take the estimate -/+ t_{11} x the jackknife SE
    from scipy.stats import t as student_t

    pol, kw = AtTurns((0, 3)), {"estimators": ("is", "dr", "wdr"), "reference": TurnZero()}
    e = estimate(pol, logged, **kw)
    task = logged.episodes["task_id"].to_numpy()
    loo = [estimate(pol, logged.subset(task != x), **kw) for x in np.unique(task)]
    for est in ("is", "dr", "wdr"):
        for q in ("SR", "U", "dSR"):
            theta = np.array([x.get(est, q)[0] for x in loo])
            se = np.sqrt(11 / 12 * ((theta - theta.mean()) ** 2).sum())
            v, lo, hi = e.get(est, q)
            half = student_t.ppf(0.975, 11) * se
            assert (lo, hi) == (
                pytest.approx(in_range(q, v - half, v + half)[0], abs=1e-9),
                pytest.approx(in_range(q, v - half, v + half)[1], abs=1e-9),
            )
            pt = e.per_task[(e.per_task["estimator"] == est) & (e.per_task["quantity"] == q)]
            assert v == pytest.approx(pt["estimate"].mean())  # the estimate is not bias-corrected
            if est == "is":  # no model: the jackknife of a mean is the t interval of the tasks
                assert pt["value"].to_numpy() == pytest.approx(pt["estimate"].to_numpy())
    # the model-based intervals are wider than the t interval of the tasks' own estimates
    pt = e.per_task[(e.per_task["estimator"] == "wdr") & (e.per_task["quantity"] == "SR")]
    _, lo_t, hi_t, _ = ko.t_interval(pt["estimate"].to_numpy(), 0.95)
    assert e.get("wdr", "SR")[2] - e.get("wdr", "SR")[1] > hi_t - lo_t


def test_support_counts_the_episodes_that_inform_the_difference(logged):
    e = estimate(AtTurns((0, 2)), logged, estimators=("is", "wdr"), reference=TurnZero())
    d = e.diagnostics
    # by hand: an episode agrees with "turns 0,2" if it called exactly at turns 0 and 2
    # (of those it reached), with "turn 0" if exactly at turn 0; they differ at turn 2 only
    st = logged.steps.assign(ep=np.repeat(np.arange(logged.n_episodes), np.diff(logged.ep_ptr)))
    agree02 = st.groupby("ep").apply(
        lambda g: bool((g["action"] == g["t"].isin([0, 2]).astype(int)).all()),
        include_groups=False,
    )
    agree0 = st.groupby("ep").apply(
        lambda g: bool((g["action"] == (g["t"] == 0).astype(int)).all()), include_groups=False
    )
    reach2 = st.groupby("ep")["t"].max() >= 2
    assert d["agree"] == int(agree02.sum()) and d["agree_ref"] == int(agree0.sum())
    assert d["deviate"] == int((agree02 & reach2).sum()) > 0
    assert d["deviate_ref"] == int((agree0 & reach2).sum()) > 0
    assert d["support"] == min(d["deviate"], d["deviate_ref"])
    assert d["reference"] == "rule: turn 0"
    # the model's part and the data's part add up to the estimate; IS has no model part
    model, data = d["parts"]["wdr"]["dSR"]
    assert model + data == pytest.approx(e.get("wdr", "dSR")[0])
    assert d["parts"]["is"]["SR"] == [0.0, pytest.approx(e.get("is", "SR")[0])]
    assert "deviating from rule: turn 0" in e.line() and "model" in e.line()
    # a policy that acts as the reference on every logged step: nothing differs, dSR = 0
    same = estimate(AtTurns((0,)), logged, estimators=("wdr",), reference=TurnZero())
    assert same.diagnostics["differs"] == 0 and same.get("wdr", "dSR") == (0.0, 0.0, 0.0)
    assert "reference" in same.to_dict()["diagnostics"]


def test_snis_reports_the_tasks_it_cannot_average():
    # p in {0, 1}, one seed: "turn 0" agrees only with an always-help episode solved at turn 0
    lg = load_logged(WORLD.collect(seeds=1, probs=(0.0, 1.0), seed=3))
    steps_of = np.diff(lg.ep_ptr)
    ok = (lg.episodes["trigger_p"].to_numpy() == 1.0) & (steps_of == 1)
    tasks_with = set(lg.episodes["task_id"][ok])
    empty = 12 - len(tasks_with)
    assert 0 < empty < 12
    with pytest.warns(UserWarning, match=f"snis averages {12 - empty} of 12 tasks"):
        e = estimate(TurnZero(), lg, estimators=("snis", "dr"))
    assert e.diagnostics["tasks_empty"] == empty
    row = e.table[(e.table["estimator"] == "snis") & (e.table["quantity"] == "SR")].iloc[0]
    assert row["tasks"] == 12 - empty and row["value"] == pytest.approx(1.0)
    assert e.table[e.table["estimator"] == "dr"]["tasks"].eq(12).all()
    assert "tasks without one" in e.support_line("dr")


def test_episode_units_bootstrap_within_tasks_and_pair_the_replicates(logged):
    e = estimate(
        Never(), logged, estimators=("dr",), unit="episode", n_boot=100, reference=TurnZero()
    )
    v, lo, hi = e.get("dr", "dSR")
    assert lo < v < hi < 0  # never is worse than one call at turn 0
    s = estimate(Never(), logged, estimators=("dr",), unit="stratum", n_boot=100)
    assert s.unit == "stratum" and s.get("dr", "SR")[0] == pytest.approx(e.get("dr", "SR")[0])


def test_rate_intervals_stay_in_their_range(logged):
    # dr can leave [0, 1] with 3 seeds a task (here its SR is 1.10): the printed interval
    # is cut to the range, which keeps its coverage (the true SR lies in [0, 1])
    e = estimate(AtTurns((0, 2)), logged, estimators=("dr", "wdr"), reference=TurnZero())
    v, lo, hi = e.get("dr", "SR")
    m, raw_lo, raw_hi = ko.t_interval(
        e.per_task.query("estimator == 'dr' and quantity == 'SR'")["value"].to_numpy(), 0.95
    )[:3]
    assert v > 1 and raw_hi > 1  # the case the cut is for
    # the same t interval by two paths (their sums may round apart in the last bit)
    assert (lo, hi) == (pytest.approx(raw_lo, rel=1e-12), 1.0)
    for est in ("dr", "wdr"):
        assert 0 <= e.get(est, "SR")[1] <= e.get(est, "SR")[2] <= 1
        assert -1 <= e.get(est, "dSR")[1] <= e.get(est, "dSR")[2] <= 1
        assert e.get(est, "U")[1] >= 0
    assert in_range("dU", -3.0, 2.0) == (-3.0, 2.0)  # a difference of calls is not cut


def test_jackknife_groups_and_pseudo_values_by_hand():
    assert ko.jackknife_groups(3, 4).tolist() == [0, 1, 2]  # up to max: one task each
    assert ko.jackknife_groups(7, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]  # sizes 3, 2, 2
    with pytest.raises(ValueError, match="max_groups"):
        ko.jackknife_groups(5, 1)
    # vals + mean(shift) - shift over the finite units; the mean is kept
    p = ko.jackknife_pseudo(np.array([1.0, 2.0, 3.0, np.nan]), np.array([0.3, 0.0, -0.3, 1.0]))
    assert p[:3] == pytest.approx([0.7, 2.0, 3.3]) and np.isnan(p[3])
    assert ko.jackknife_pseudo(np.array([5.0, np.nan]), np.array([1.0, 1.0])).tolist()[0] == 5.0


def test_grouped_jackknife_is_the_delete_a_group_jackknife_by_hand(logged):
    # 12 tasks in 4 groups of 3 (round-robin over the sorted tasks): drop each group,
    # estimate again on the other nine (the control variate refitted on them), and the
    # interval is the estimate -/+ t_3 x sqrt((G - 1)/G sum (theta_(-g) - mean)^2)
    from scipy.stats import t as student_t

    pol, kw = AtTurns((0, 3)), {"estimators": ("is", "dr", "wdr"), "reference": TurnZero()}
    e = estimate(pol, logged, max_groups=4, **kw)
    task = logged.episodes["task_id"].astype(str).to_numpy()
    names = np.unique(task)
    groups = np.arange(12) % 4
    assert e.per_task.drop_duplicates("task").set_index("task")["group"].to_dict() == dict(
        zip(names, groups.tolist())
    )
    drop = [
        estimate(pol, logged.subset(~np.isin(task, names[groups == c])), **kw) for c in range(4)
    ]
    full = estimate(pol, logged, **kw)  # one task per group: same estimates, other intervals
    for est in ("is", "dr", "wdr"):
        for q in ("SR", "U", "dSR"):
            theta = np.array([x.get(est, q)[0] for x in drop])
            se = np.sqrt(3 / 4 * ((theta - theta.mean()) ** 2).sum())
            v, lo, hi = e.get(est, q)
            assert v == pytest.approx(full.get(est, q)[0], abs=1e-12)
            half = student_t.ppf(0.975, 3) * se
            want = in_range(q, v - half, v + half)
            assert (lo, hi) == (pytest.approx(want[0], abs=1e-9), pytest.approx(want[1], abs=1e-9))
    # the same groups given by name; a task without one is refused by name
    by_name = estimate(pol, logged, clusters=dict(zip(names, groups.tolist())), **kw)
    assert by_name.table.equals(e.table)
    with pytest.raises(ValueError, match=f"no group for task '{names[0]}'"):
        estimate(pol, logged, clusters={n: 0 for n in names[1:]}, **kw)


def test_the_jackknife_refits_once_per_group(logged, monkeypatch):
    # its cost is linear in the data: (policy + reference) x (1 + groups) fits of each of
    # the 2 quantities (SR, U_1) x 2 folds, whatever the number of tasks
    calls = []
    fit = ko.fit_q
    monkeypatch.setattr(ko, "fit_q", lambda *a, **k: calls.append(1) or fit(*a, **k))
    for g, want in ((12, 2 * 13 * 4), (4, 2 * 5 * 4), (3, 2 * 4 * 4)):
        calls.clear()
        estimate(AtTurns((0, 2)), logged, estimators=("wdr",), reference=TurnZero(), max_groups=g)
        assert len(calls) == want, g


def test_wdr_of_every_task_at_once_is_the_per_task_loop():
    # weighted_dr_groups (one pass over the episodes sorted by task) against weighted_dr
    # on each task's episodes, over random groupings, replicates and ratio patterns
    rng = np.random.default_rng(0)
    for _ in range(30):
        n, h, b = int(rng.integers(5, 120)), int(rng.integers(1, 7)), 3
        k = int(rng.integers(1, min(n, 20) + 1))
        task = np.r_[np.arange(k), rng.integers(0, k, n - k)]
        rng.shuffle(task)
        counts = rng.integers(0, 3, (b, n)).astype(float)
        counts[0] = 1.0
        v0, d = rng.random(n), rng.normal(size=(n, h))
        rho = rng.random((n, h)) * (rng.random((n, h)) < 0.6)
        want = np.full((b, k), np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            for j in range(k):
                m = task == j
                want[:, j] = ko.weighted_dr(counts[:, m], v0[m], rho[m], d[m])
        order, starts = ko.group_order(task, k)
        got = ko.weighted_dr_groups(counts, v0, rho, d, order, starts)
        ok = np.isfinite(want)
        assert (np.isfinite(got) == ok).all()
        assert got[ok] == pytest.approx(want[ok], rel=1e-12, abs=1e-14)
    with pytest.raises(ValueError, match="a group without a member"):
        ko.group_order(np.array([0, 2]), 3)


def test_the_group_matrix_is_sparse_past_its_size_and_sums_alike():
    codes = np.arange(3000) % 1500  # 3,000 x 1,500 cells > 2^22
    big, small = ko.group_matrix(codes), ko.group_matrix(codes[:40] % 7)
    assert not isinstance(big, np.ndarray) and isinstance(small, np.ndarray)
    x = np.random.default_rng(1).random((2, 3000))
    dense = np.zeros((3000, 1500))
    dense[np.arange(3000), codes] = 1.0
    assert isinstance(x @ big, np.ndarray)
    assert (x @ big) == pytest.approx(x @ dense, rel=1e-12)
