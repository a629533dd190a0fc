"""The command lines and their outputs (docs/method.md, "Outputs"), on the demo data."""

import json
import re
import subprocess
import sys
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest
from dp_helpers import lp_optimum, make_frames
from omegaconf import OmegaConf
from plot_helpers import assert_drawn_png

from helpdp import (
    demo_dataset_path,
    from_frames,
    frontier,
    generate_synthetic,
    load_dataset,
    search_budget,
    write_dataset,
)
from helpdp.pareto import FrontierConfig, run_frontier
from helpdp.search import SearchConfig, run_search

KEYS = {
    "budget",
    "r",
    "expected_usage",
    "expected_success",
    "mixture",
    "solves",
    "seconds",
    "rule",
    "gamma",
}


def _cfg(schema, **kw):
    return OmegaConf.merge(OmegaConf.structured(schema), kw)


def test_search_writes_the_contract_outputs(tmp_path):
    (res,) = run_search(_cfg(SearchConfig, budget=1.0, out=str(tmp_path), quiet=True))
    js = json.loads((tmp_path / "search.json").read_text())
    assert set(js) == KEYS and js == json.loads(json.dumps(res))
    assert js["expected_usage"] <= 1.0 + 1e-9 and js["rule"] == "exact" and js["gamma"] == 1.0
    mix = js["mixture"]
    assert set(mix) == {"r", "weight_more_help", "more_help", "less_help"}
    assert mix["less_help"]["expected_usage"] <= 1.0 < mix["more_help"]["expected_usage"]
    w = mix["weight_more_help"]
    assert js["expected_usage"] == pytest.approx(
        w * mix["more_help"]["expected_usage"] + (1 - w) * mix["less_help"]["expected_usage"]
    )
    pol = pd.read_parquet(tmp_path / "policy.parquet")
    assert list(pol.columns) == ["state_id", "action", "usage", "success"]
    assert [str(t) for t in pol.dtypes] == ["int64", "int8", "float64", "float64"]
    more = pd.read_parquet(tmp_path / "policy_more_help.parquet")
    assert (more["action"] == 1).sum() > (pol["action"] == 1).sum()
    # the policy file agrees with search.json: episode-weighted mean of usage at starts
    ds = load_dataset(demo_dataset_path())
    starts = ds.state_ids[ds.mdp.start_weight > 0]
    w_start = ds.mdp.start_weight[ds.mdp.start_weight > 0]
    u = pol.set_index("state_id").loc[starts, "usage"].to_numpy()
    assert np.average(u, weights=w_start) == pytest.approx(mix["less_help"]["expected_usage"])


def test_budget_list_sweeps_into_subdirectories(tmp_path):
    out = run_search(_cfg(SearchConfig, budget=[0.5, 1, 2], out=str(tmp_path), quiet=True))
    assert [o["budget"] for o in out] == [0.5, 1.0, 2.0]
    succ = [o["expected_success"] for o in out]
    assert succ == sorted(succ) and succ[0] < succ[-1]  # more budget, more success
    for b in ["0.5", "1", "2"]:
        js = json.loads((tmp_path / f"budget={b}" / "search.json").read_text())
        assert js["expected_usage"] <= float(b) + 1e-9


@pytest.mark.parametrize("method", ["auto", "solves"])
def test_the_solve_count_printed_is_the_solve_lines_printed(tmp_path, capsys, method):
    """Each budget's line counts the ``solve`` lines printed for it (numbered from 1 per
    budget), and says "trace + " where the per-task trace answered it (its line once)."""
    out = run_search(_cfg(SearchConfig, budget=[0.5, 1, 2], out=str(tmp_path), method=method))
    lines = capsys.readouterr().out.splitlines()
    groups: list[int] = []
    for line in lines:
        if re.match(r"solve +1:", line):
            groups.append(0)
        if line.startswith("solve "):
            groups[-1] += 1
    said = [
        re.search(r"\[(trace \+ )?(\d+) solves?, ", ln) for ln in lines if ln.startswith("budget ")
    ]
    assert len(said) == len(groups) == 3
    traced = any(ln.startswith("trace: ") for ln in lines)
    assert traced == (method == "auto")
    for m, n, o in zip(said, groups, out, strict=True):
        assert int(m.group(2)) == n and bool(m.group(1)) == traced
        assert o["solves"] == n + traced  # search.json counts the trace as one


WARM = r"\[(?:trace \+ )?\d+ solves?, \d+\.\d{3}s \+ \d+\.\d{3}s warm-up \(numba compile/load, first solve\)\] -> "


def test_frontier_agrees_with_search_and_plots(tmp_path, capsys):
    fr = run_frontier(_cfg(FrontierConfig, budget=1.0, out=str(tmp_path)))
    # the first solve (numba's compile or cache load) is timed apart from fr.seconds
    assert re.search(rf"\n{len(fr.table)} frontier policies  {WARM}", capsys.readouterr().out)
    t = pd.read_parquet(tmp_path / "frontier.parquet")
    assert list(t.columns) == ["r_min", "r_max", "expected_usage", "expected_success"]
    assert np.all(np.diff(t["expected_usage"]) > 0) and np.all(
        np.diff(t["expected_success"]) >= -1e-12
    )
    assert np.all(t["r_min"] <= t["r_max"])
    # concave: slopes fall
    slopes = np.diff(t["expected_success"]) / np.diff(t["expected_usage"])
    assert np.all(np.diff(slopes) <= 1e-9)
    ds = load_dataset(demo_dataset_path())
    for b in [0.3, 1.0, 2.5]:
        res = search_budget(ds.mdp, b, gamma=1.0)
        assert fr.success_at(b) == pytest.approx(res.expected_success, abs=1e-9)
    assert_drawn_png(tmp_path / "frontier.png", min_width=1200, min_height=500)


def test_frontier_vertices_match_lp_on_a_small_mdp():
    from dp_helpers import random_dag

    frames = random_dag(np.random.default_rng(11), n_inner=9, max_succ=3)
    from helpdp import from_frames

    ds = from_frames(*frames)
    fr = frontier(ds.mdp, gamma=1.0, progress=False)
    t = fr.table
    for u in np.linspace(t["expected_usage"].iloc[0], t["expected_usage"].iloc[-1], 7):
        assert fr.success_at(u) == pytest.approx(lp_optimum(frames, [u]), abs=1e-9)


def test_two_interventions_per_intervention_budgets(tmp_path, capsys):
    # two independent decisions, one per intervention kind: s0 (a: nohelp 0.5 / i1 0.9 / i2 0.6)
    tr = [(0, 0, 1, 1), (0, 0, 2, 1), (0, 1, 1, 9), (0, 1, 2, 1), (0, 2, 1, 6), (0, 2, 2, 4)]
    manifest, states, trans = make_frames(3, tr, success=(1,), actions=("nohelp", "oracle", "llm"))
    d = write_dataset(tmp_path / "data", manifest, {"states": states, "transitions": trans})
    cfg = _cfg(
        SearchConfig,
        data=str(d),
        out=str(tmp_path / "o"),
        quiet=True,
        budgets={"oracle": 0.0, "llm": 1.0},
    )
    (js,) = run_search(cfg)
    assert js["expected_usage"] == {"oracle": 0.0, "llm": 1.0}
    assert re.search(rf"\(\d policies mixed\)  {WARM}", capsys.readouterr().out)
    assert js["expected_success"] == pytest.approx(0.6)
    # half the episodes with the oracle, half without: 0.5 * 0.9 + 0.5 * 0.5
    cfg = _cfg(
        SearchConfig,
        data=str(d),
        out=str(tmp_path / "m"),
        quiet=True,
        budgets={"oracle": 0.5, "llm": 0.0},
    )
    (js,) = run_search(cfg)
    assert js["expected_success"] == pytest.approx(0.7)
    assert (
        js["expected_usage"]["oracle"] == pytest.approx(0.5) and js["expected_usage"]["llm"] == 0.0
    )
    comps = js["mixture"]["components"]
    assert sorted(round(c["weight"], 9) for c in comps) == [0.5, 0.5]
    for c in comps:
        assert pd.read_parquet(tmp_path / "m" / c["file"])["action"].isin([0, 1, 2]).all()
    det = pd.read_parquet(tmp_path / "m" / "policy.parquet")
    assert (det["action"] != 1).all()  # the deterministic policy meets both budgets alone
    with pytest.raises(ValueError, match="budgets.<name>=C for \\['llm'\\]"):
        run_search(
            _cfg(
                SearchConfig,
                data=str(d),
                out=str(tmp_path / "o"),
                quiet=True,
                budgets={"oracle": 1.0},
            )
        )


def test_k_interventions_when_no_mixed_policy_meets_the_budgets_alone(tmp_path):
    from dp_helpers import random_dag

    # every component of this mixture spends more than 0.5 of some intervention
    manifest, states, trans = random_dag(np.random.default_rng(5), n_inner=40, n_actions=3)
    d = write_dataset(tmp_path / "data", manifest, {"states": states, "transitions": trans})
    budgets = {"i1": 0.5, "i2": 0.5}
    (js,) = run_search(
        _cfg(SearchConfig, data=str(d), out=str(tmp_path / "o"), quiet=True, budgets=budgets)
    )
    comps = js["mixture"]["components"]
    assert all(any(c["expected_usage"][k] > 0.5 for k in budgets) for c in comps)
    assert js["expected_usage"] == pytest.approx(budgets)
    assert js["expected_success"] == pytest.approx(
        lp_optimum((manifest, states, trans), [0.5, 0.5])
    )
    # policy.parquet is then the least-help policy, which meets both budgets
    ds = load_dataset(d)
    det = pd.read_parquet(tmp_path / "o" / "policy.parquet")
    assert js["r"] == {"i1": 1e12, "i2": 1e12}
    start = ds.states.set_index("state_id").loc[det["state_id"], "is_start"].to_numpy()
    assert (det.loc[start, ["usage_i1", "usage_i2"]].to_numpy() <= 0.5).all()


def test_cli_demo_and_help(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "helpdp.search", "budget=1.0"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert (tmp_path / "outputs" / "search" / "search.json").is_file()  # make demo's out
    assert "budget 1: r=" in out.stdout and "E[U]=1.0000" in out.stdout
    assert "RuntimeWarning" not in out.stderr
    helptext = subprocess.run(
        [sys.executable, "-m", "helpdp.search", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for f in fields(SearchConfig):
        assert f"{f.name}=" in helptext and f.metadata["help"][:40] in helptext


def test_synthetic_generator_is_agent_like_and_deterministic():
    manifest, states, transitions, episodes, _ = generate_synthetic()
    again = generate_synthetic()
    pd.testing.assert_frame_equal(transitions, again[2])
    ds = from_frames(manifest, states, transitions, episodes=episodes)
    assert ds.mdp.acyclic and ds.states["task_id"].nunique() >= 20
    assert ds.episodes.groupby("trigger_p")["success"].mean().is_monotonic_increasing
    # help is worth more at some states than others: the frontier is strictly concave
    fr = frontier(ds.mdp, gamma=1.0, progress=False)
    slopes = np.diff(fr.table["expected_success"]) / np.diff(fr.table["expected_usage"])
    assert slopes[0] > 5 * slopes[len(slopes) // 2] > 0


def test_paper_rule_from_the_command_line(tmp_path):
    """rule=paper reads scores.parquet; here the data's own success rates per
    (state, action) stand in for a PRM."""
    import shutil

    from helpdp import behavior_values

    data = tmp_path / "demo"
    shutil.copytree(demo_dataset_path(), data)
    ds = load_dataset(data)
    bv = behavior_values(ds)
    live = ~ds.states.set_index("state_id").loc[bv["state_id"], "terminal"].to_numpy()
    scores = bv.loc[live, ["state_id", "action", "p_success"]].assign(source="behavior")
    scores.to_parquet(data / "scores.parquet", index=False)
    (js,) = run_search(
        _cfg(
            SearchConfig,
            data=str(data),
            budget=1.0,
            rule="paper",
            out=str(tmp_path / "o"),
            quiet=True,
        )
    )
    assert js["rule"] == "paper" and js["expected_usage"] <= 1.0 + 1e-9
    exact = search_budget(ds.mdp, 1.0, gamma=1.0)
    # the exact rule is optimal under the model: the heuristic of Min et al. (2025) cannot beat it
    assert js["expected_success"] <= exact.expected_success + 1e-9
    # and it beats random help at the same expected usage: help with probability q at
    # every state where both actions were observed, q bisected to spend E[U] as much
    random_success = _random_help_success(ds, js["expected_usage"])
    assert js["expected_success"] > random_success + 0.05, (js, random_success)


def _random_help_success(ds, usage: float) -> float:
    from helpdp.forecast import policy_value

    mdp = ds.mdp
    rs = np.repeat(np.arange(mdp.n_states), np.diff(mdp.sa_ptr))
    n_rows_of = np.bincount(rs, minlength=mdp.n_states)[rs]
    help_row = mdp.sa_action > 0

    def value(q):
        pi = np.where(n_rows_of == 1, 1.0, np.where(help_row, q, 1.0 - q))
        return policy_value(mdp, pi, gamma=ds.gamma)

    lo, hi = 0.0, 1.0
    assert value(lo).total_usage <= usage <= value(hi).total_usage
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if value(mid).total_usage < usage else (lo, mid)
    v = value(0.5 * (lo + hi))
    assert v.total_usage == pytest.approx(usage, abs=1e-6)
    return v.expected_success


def test_importing_helpdp_does_not_import_torch():
    code = "import sys, helpdp; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def _search(args, cwd, **env):
    import os

    return subprocess.run(
        [sys.executable, "-m", "helpdp.search", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={**os.environ, **env},
    )


def _numbers(js):
    return {k: v for k, v in js.items() if k not in ("seconds", "solves")}  # the DP's numbers


def test_make_demo_twice_reruns_and_says_what_it_replaced(tmp_path):
    first, second = _search(["budget=1.0"], tmp_path), _search(["budget=1.0"], tmp_path)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    line = [s.stdout.strip().splitlines()[-1].rsplit("  [", 1)[0] for s in (first, second)]
    assert line[0] == line[1] and line[0].startswith("budget 1: r=0.230769  E[U]=1.0000")
    assert first.stderr == ""
    assert second.stderr.strip() == (
        "helpdp.search: note: a rerun of the same config: replaced policy.parquet, "
        "policy_more_help.parquet, search.json in out=outputs/search"
    )
    # another budget into the same out=: refused, one line, the first outputs untouched
    before = (tmp_path / "outputs/search/search.json").read_bytes()
    other = _search(["budget=2"], tmp_path)
    assert other.returncode == 2 and other.stderr.strip() == (
        "helpdp.search: error: out=outputs/search holds the outputs of another helpdp.search "
        "config (budget=1.0 there, 2 here); use another out= or overwrite=true to write "
        "there anyway"
    )
    assert (tmp_path / "outputs/search/search.json").read_bytes() == before
    # the record beside the outputs re-runs them (Hydra's --config-dir/--config-name)
    rec = tmp_path / "outputs/search/.hydra"
    assert (rec / "overrides.yaml").read_text() == "- budget=1.0\n"
    again = _search(["--config-dir", str(rec), "--config-name", "config", "out=again"], tmp_path)
    assert again.returncode == 0, again.stderr
    js = [
        json.loads((tmp_path / d / "search.json").read_text()) for d in ("outputs/search", "again")
    ]
    assert _numbers(js[0]) == _numbers(js[1])
    assert OmegaConf.load(tmp_path / "again/.hydra/config.yaml").budget == 1.0
    empty = _search(["out="], tmp_path)
    assert empty.returncode == 2 and empty.stderr.strip().startswith(
        "helpdp.search: error: out= is empty: name the directory to write"
    )


def test_hydra_habits_sweep_cfg_and_run_dir(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    run = _search(["-m", "budget=0.5,1,2", "out=sw", "quiet=true"], cwd, TMPDIR=str(tmp))
    assert run.returncode == 0, run.stderr
    # one directory per job under out=, each with its record; nothing else in the cwd,
    # and Hydra's own sweep directory is gone
    assert sorted(p.name for p in cwd.iterdir()) == ["sw"]
    assert sorted(p.name for p in (cwd / "sw").iterdir()) == ["budget=0.5", "budget=1", "budget=2"]
    assert [p.name for p in tmp.iterdir() if p.name.startswith("helpdp-sweep")] == []
    swept = [
        json.loads((cwd / f"sw/budget={b}/search.json").read_text()) for b in ("0.5", "1", "2")
    ]
    assert [
        OmegaConf.load(cwd / f"sw/budget={b}/.hydra/config.yaml").out for b in ("0.5", "1")
    ] == ["sw/budget=0.5", "sw/budget=1"]
    # the same numbers as the contract's budget list (one load, OUT/budget=<value>/)
    listed = run_search(_cfg(SearchConfig, budget=[0.5, 1, 2], out=str(tmp_path / "l"), quiet=True))
    assert [_numbers(j) for j in swept] == [_numbers(json.loads(json.dumps(j))) for j in listed]
    # --cfg prints the config and writes nothing
    cfg = _search(["--cfg", "job", "budget=3"], cwd)
    assert cfg.returncode == 0 and OmegaConf.create(cfg.stdout).budget == 3
    assert sorted(p.name for p in cwd.iterdir()) == ["sw"]
    # hydra.run.dir=X is where the outputs go: no empty directory of Hydra's
    x = _search(["hydra.run.dir=X", "quiet=true"], cwd)
    assert x.returncode == 0, x.stderr
    assert sorted(p.name for p in cwd.iterdir()) == ["X", "sw"]
    assert (cwd / "X/search.json").is_file()
