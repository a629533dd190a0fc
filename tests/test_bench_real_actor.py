"""bench/real_actor.py --eval-report: the table the real-actor evaluation is reported with
(docs/evaluation/real-actor.md), on results written by hand."""

import importlib.util
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
    pd.DataFrame({"policy": policy, "split": "test", "pair": pairs, "success": success,
                  "expert_calls": calls, "steps": 3}).to_parquet(d / "results.parquet")  # fmt: skip


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
    with pytest.raises(SystemExit, match="in two runs"):
        bench.eval_report(dirs + [dirs[0]])
