"""`python -m helpdp.evaluate.calibrate helper_dir=H [worlds=DIR] split=S seeds=[...]`

Re-picks a threshold-mode helper's per-budget thresholds **in the environments**:
for each budget, a bisection on the help-score threshold runs the helper on the
split's tasks × ``seeds`` and keeps the threshold whose realised expert calls per
episode come closest to the budget.

Why: the thresholds of ``python -m helpdp.helper.train`` are calibrated on the
validation tasks' count model, so the spend they buy holds in the worlds the
helper was trained on. In a world family it never saw the scores shift, and so
does the spend: the unseen-world run of docs/results/README.md realised 0.30 / 0.42 / 2.71 calls at
``helper.budget`` 0.5 / 1 / 2. This needs no labels and no success signal, only
the number of calls the helper makes, so it can run on the deployment worlds'
tasks (with seeds kept apart from the evaluation's). Realised usage is
non-increasing in the threshold for a fixed episode (a higher threshold helps at
a subset of the states it meets, until the paths part), and the runs share seeds
(common random numbers), so the bisection is on a nearly monotone, low-noise
curve. Each step is one run of ``len(tasks) × len(seeds)`` episodes; runs are
cached by threshold and budgets share them (thresholds are made non-increasing
in the budget, as training makes them).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from collect import collector  # collector.collect: patchable in tests
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app
from helpdp.cliconf.outdir import RECORD, read_record
from helpdp.data import load_dataset
from helpdp.demo import demo_dataset_path
from helpdp.evaluate.harness import EvaluateConfig, environment_runs, run_config, shared_actor
from helpdp.helper.card import write_card
from helpdp.helper.policy import HelperPolicy
from helpdp.helper.train import HELPER_JSON
from helpdp.splits import task_splits

COMMAND = "helpdp.evaluate.calibrate"

__all__ = ["HelperCalibrateConfig", "bisect_threshold", "calibrate_in_env", "run_calibrate"]


@dataclass
class HelperCalibrateConfig:
    """`python -m helpdp.evaluate.calibrate`: re-pick a helper's thresholds by its realised
    expert calls in the environments it will be deployed in (no labels, no retraining)."""

    helper_dir: str = _f("???", "the helper directory (python -m helpdp.helper.train)")
    data: Any = _f(
        None,
        "a collected dataset whose collection config (worlds, actor, expert, split rule) the "
        "calibration episodes reuse; null: the demo dataset",
    )
    worlds: Any = _f(
        None, "AWM directory to run in instead of the data's (a world family it never saw)"
    )
    split: str = _f("validation", "task split whose tasks the calibration episodes run")
    seeds: list[int] = _f(
        list(range(900, 910)),
        "calibration seeds, one episode per (task, seed); keep them apart from evaluation seeds",
    )
    budgets: list | None = _f(None, "budgets to calibrate; null: the helper's trained budgets")
    iters: int = _f(
        8, "bisection steps per budget on the help-score threshold in [0, 1] (one run each)"
    )
    max_tasks: Any = _f(None, "at most the first N tasks of each scenario (smoke runs)")
    batch_size: int = _f(8, "episodes run in lock step (results do not depend on it)")
    out: Any = _f(
        None,
        "write the recalibrated helper here (a copy of helper_dir); null: rewrite "
        "helper_dir/helper.json in place (its old thresholds kept under thresholds_before)",
    )
    progress: bool = _f(True, "progress bars")


def bisect_threshold(
    usage_at: Callable[[float], float],
    budget: float,
    *,
    lo: float = 0.0,
    hi: float = 1.0,
    iters: int = 8,
) -> tuple[float, float, list[tuple[float, float]]]:
    """The threshold in ``(lo, hi)`` whose ``usage_at`` (calls per episode, assumed
    non-increasing in the threshold) is closest to ``budget``, by ``iters`` bisection
    steps (``lo`` and ``hi`` themselves are not run). Returns ``(threshold, usage,
    trace)``, ``trace`` the ``(threshold, usage)`` pairs evaluated in order; at equal
    distance the smaller usage wins (spend at most the budget)."""
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    if not lo < hi:
        raise ValueError(f"need lo < hi, got [{lo}, {hi}]")
    trace: list[tuple[float, float]] = []
    for _ in range(int(iters)):
        mid = 0.5 * (lo + hi)
        u = float(usage_at(mid))
        trace.append((mid, u))
        lo, hi = (lo, mid) if u <= budget else (mid, hi)
    t, u = min(trace, key=lambda p: (abs(p[1] - budget), p[1]))
    return t, u, trace


def calibrate_in_env(
    policy, run: Callable[[object], pd.DataFrame], budgets, *, iters: int = 8, progress=None
) -> dict[float, dict]:
    """Per budget, :func:`bisect_threshold` on realised usage: ``run(policy)`` runs
    the episodes and returns their ``episodes.parquet`` rows (``expert_calls``),
    ``policy`` a :class:`HelperPolicy` whose ``set_threshold`` fixes the threshold.
    Budgets ascending; each one's search lies below the previous one's threshold.
    Returns ``{budget: {threshold, tie_weight, usage, episodes, trace}}``."""
    cache: dict[float, tuple[float, int]] = {}

    def usage_at(t: float) -> float:
        if t not in cache:
            policy.set_threshold(t)
            ep = run(policy)
            cache[t] = (float(ep["expert_calls"].mean()), len(ep))
            if progress is not None:
                progress(t, cache[t][0])
        return cache[t][0]

    out, hi = {}, 1.0
    try:
        for b in sorted(float(x) for x in budgets):
            t, u, trace = bisect_threshold(usage_at, b, lo=0.0, hi=hi, iters=iters)
            out[b] = {
                "threshold": t,
                "tie_weight": 0.0,
                "usage": u,
                "episodes": cache[t][1],
                "trace": [[x, y] for x, y in trace],
            }
            hi = t
    finally:
        policy.set_threshold(None)
    return out


def _copy_helper(src: Path, dst: Path) -> None:
    """Copy the helper ``src`` into ``out=dst``, a new directory or one that holds only
    the out= guard's record of this run (:mod:`helpdp.cliconf.outdir` writes it before
    the command runs) or a run of this command it recorded (a rerun: the guard accepted
    it, so what is there is this command's and is copied over afresh from ``src``)."""
    if dst.exists() or dst.is_symlink():
        if dst.is_symlink() or not dst.is_dir():
            raise ValueError(f"out={dst} exists and is not a directory; give a new directory")
        others = sorted(p.name for p in dst.iterdir() if p.name != RECORD)
        record = read_record(dst)
        ours = record is not None and record.get("command") == COMMAND
        if others and not ours:
            raise ValueError(
                f"out={dst} exists and holds {others[0]!r}; give a new directory "
                "(or out=null: in place)"
            )
    shutil.copytree(src, dst, dirs_exist_ok=True)


def run_calibrate(cfg: HelperCalibrateConfig) -> dict:
    """The body of ``python -m helpdp.evaluate.calibrate``: returns the new helper.json."""

    t0 = time.perf_counter()
    src = Path(cfg.helper_dir)
    dst = Path(cfg.out) if cfg.out else src
    if dst != src:
        _copy_helper(src, dst)
    policy = HelperPolicy(dst)
    if policy.mode != "threshold":
        raise ValueError(f"{src}: a prefix-mode helper has no thresholds to calibrate")
    budgets = sorted(float(b) for b in (cfg.budgets or policy.budgets))
    ds = load_dataset(Path(cfg.data) if cfg.data else demo_dataset_path())
    ecfg = EvaluateConfig(
        worlds=cfg.worlds,
        seeds=list(cfg.seeds),
        max_tasks=cfg.max_tasks,
        batch_size=int(cfg.batch_size),
    )
    base, _ = environment_runs(ds.manifest, task_splits(ds), ecfg)
    from tqdm import tqdm

    # iters runs per budget, fewer where two budgets' searches meet a threshold twice
    total = len(budgets) * int(cfg.iters)
    bar = tqdm(total=total, desc="calibrate (runs, at most)", unit="run", disable=not cfg.progress)
    runs = []  # one fresh directory per run (a threshold's name is in its fingerprint)
    with tempfile.TemporaryDirectory(prefix="helpdp-calibrate-") as tmp:
        actor = shared_actor(base.actor)

        def run(pol):
            out = Path(tmp) / f"run{len(runs)}"
            runs.append(out)
            collector.collect(run_config(base, str(cfg.split), out), help_policy=pol, **actor())
            return pd.read_parquet(out / "episodes.parquet")

        def shown(t, u):
            bar.set_postfix(threshold=f"{t:.4f}", usage=f"{u:.3f}", refresh=False)
            bar.update(1)

        calib = calibrate_in_env(policy, run, budgets, iters=int(cfg.iters), progress=shown)
    bar.close()
    meta = dict(policy.meta)
    meta["thresholds_before"] = meta.get("thresholds")
    meta["tie_weights_before"] = meta.get("tie_weights")
    th = {f"{float(b):g}": t for b, t in (meta.get("thresholds") or {}).items()}
    tw = {f"{float(b):g}": w for b, w in (meta.get("tie_weights") or {}).items()}
    for b, c in calib.items():
        th[f"{b:g}"], tw[f"{b:g}"] = c["threshold"], 0.0
    meta.update(thresholds=th, tie_weights=tw, calibration="env")
    meta["budgets"] = sorted({*map(float, meta["budgets"]), *budgets})
    meta["metrics"] = {
        **meta.get("metrics", {}),
        "calibration_env": {
            "worlds": str(cfg.worlds) if cfg.worlds else None,
            "data": str(cfg.data) if cfg.data else None,
            "split": str(cfg.split),
            "seeds": [int(s) for s in cfg.seeds],
            "budgets": {f"{b:g}": c for b, c in calib.items()},
            "seconds": time.perf_counter() - t0,
        },
    }
    (dst / HELPER_JSON).write_text(json.dumps(meta, indent=2, default=float) + "\n")
    write_card(dst, meta)
    for b, c in calib.items():
        print(
            f"budget {b:g}: threshold {c['threshold']:.6f} -> {c['usage']:.3f} calls/episode "
            f"({c['episodes']} episodes; was {(meta['thresholds_before'] or {}).get(f'{b:g}')})"
        )
    return meta


def main() -> None:
    run_app(
        COMMAND,
        HelperCalibrateConfig,
        run_calibrate,
        config_name="helper_calibrate",
    )


if __name__ == "__main__":
    main()
