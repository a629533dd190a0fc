"""How many solves a search takes and reports (issue 34, item 11): ``rule=paper``
stops once r no longer moves at the precision it is reported with, and a budget's
solve count is the same searched alone or inside a list."""

import re
import shutil

import pytest
from omegaconf import OmegaConf

from helpdp import behavior_values, demo_dataset_path, load_dataset, search_budget
from helpdp.search import SearchConfig, run_search
from helpdp.solve import score_rows

SOLVE = re.compile(r"solve +\d+: r=(\S+)  E\[U\]=(\S+)")


@pytest.fixture(scope="module")
def demo_with_scores(tmp_path_factory):
    """The demo data with its own success rates per (state, action) as PRM scores."""
    data = tmp_path_factory.mktemp("paper") / "demo"
    shutil.copytree(demo_dataset_path(), data)
    ds = load_dataset(data)
    bv = behavior_values(ds)
    live = ~ds.states.set_index("state_id").loc[bv["state_id"], "terminal"].to_numpy()
    scores = bv.loc[live, ["state_id", "action", "p_success"]].assign(source="behavior")
    scores.to_parquet(data / "scores.parquet", index=False)
    return data


# budget -> (r*, E[U] of the less-help and the more-help policy): the breakpoints the
# bisection to a relative width of 1e-9 found (34 and 35 solves) before this change
PAPER = {1.0: (0.2, 0.919540, 1.044048), 2.0: (4 / 49, 1.970739, 2.099558)}


@pytest.mark.parametrize("budget", sorted(PAPER))
def test_the_paper_rule_stops_when_r_stops_moving(demo_with_scores, budget):
    ds = load_dataset(demo_with_scores)
    lines = []
    res = search_budget(
        ds.mdp, budget, gamma=ds.gamma, rule="paper", p_row=score_rows(ds), log=lines.append
    )
    solves = [SOLVE.match(line).groups() for line in lines]
    assert res.solves == len(solves) <= 26  # 34 and 35 before
    r_logged = [r for r, _ in solves]
    # every solve moves r at the precision the log (and the command's line) reports
    assert all(a != b for a, b in zip(r_logged, r_logged[1:])), r_logged
    r_star, u_less, u_more = PAPER[budget]
    # the same two policies as the finer bisection, r within the reported precision
    assert res.r == pytest.approx(r_star, rel=2e-6) and res.r >= r_star
    assert res.policy.total_usage == pytest.approx(u_less, abs=1e-6)
    assert res.more_help.total_usage == pytest.approx(u_more, abs=1e-6)
    assert res.expected_usage == pytest.approx(budget, abs=1e-12)


def _solves(tmp_path, rule, budget, data=None):
    cfg = OmegaConf.merge(
        OmegaConf.structured(SearchConfig),
        dict(budget=budget, rule=rule, out=str(tmp_path), quiet=True, data=data),
    )
    return {js["budget"]: js["solves"] for js in run_search(cfg)}


@pytest.mark.parametrize("rule", ["exact", "paper"])
def test_a_budget_reports_the_same_solves_alone_and_in_a_list(tmp_path, demo_with_scores, rule):
    data = str(demo_with_scores)
    alone = {b: _solves(tmp_path / f"{b}", rule, b, data)[b] for b in (1.0, 2.0)}
    listed = _solves(tmp_path / "list", rule, [1.0, 2.0], data)
    assert listed == alone
    assert listed[2.0] == _solves(tmp_path / "two", rule, [2.0, 1.0], data)[2.0]
    if rule == "exact":  # the trace (one pass, counted as one solve) and two solves
        assert alone == {1.0: 3, 2.0: 4}
