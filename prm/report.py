"""``python -m prm.report data=DIR prm_dir=PRMDIR``: discrimination and calibration.

For every split (tasks split as the PRM was trained), each step of each episode
is one row: the PRM's p(success | state, action taken) against the episode's
success. Reported: AUROC, Brier score, expected calibration error (ECE), and
ECE/Brier after temperature scaling, the temperature fitted on the validation
split and kept only where it improves held-out calibration (``checked_temperature``:
fitted on half the validation tasks, the other half's ECE must drop), else 1 with a note. With ``baseline=true`` (default) a tabular PRM fitted on the same training
splits is evaluated alongside: on held-out tasks it can only use the depth, so a
text PRM that does not beat it has learned nothing from the text.

Prints a table, writes a reliability diagram PNG, and ends with ONE JSON object on
its last line: ``{split: {"auroc", "brier", "ece", "ece_scaled", ...}}``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from helpdp import load_dataset
from helpdp.cliconf import as_config, run_app
from helpdp.splits import SPLITS
from prm.base import sigmoid
from prm.config import ReportConfig
from prm.data import build_examples
from prm.load import load_prm
from prm.metrics import checked_temperature, reliability_diagram, summarize


def _clean(x):
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def prm_metrics(
    prm,
    ds,
    *,
    n_bins: int = 10,
    allow_other_actor: bool = False,
    baseline: bool = True,
    progress: bool = False,
):
    """Metrics per split. Returns ``(metrics, curves)``: ``metrics[split]`` as in the
    JSON line; ``curves`` maps a label to ``(y, p, w)`` for the reliability diagram."""
    prm.check_dataset(ds, allow_other_actor=allow_other_actor)
    splits = prm.splits(ds)
    ex = build_examples(ds, splits, label_source="auto")
    f = ex.frame
    idx, y, w = ex.eval_rows()
    row_split = f["split"].to_numpy()[idx]
    row_task = f["task_id"].to_numpy()[idx]

    def per_split(z, tag):
        val = row_split == "validation"
        temperature, note = 1.0, "identity: no validation rows"
        if val.any():
            temperature, note = checked_temperature(y[val], z[val], w[val], row_task[val], n_bins)
        out, curves = {}, {}
        for s in SPLITS:
            m = row_split == s
            if not m.any():
                continue
            p = sigmoid(z[m])
            out[s] = summarize(y[m], p, w[m], temperature, n_bins)
            out[s]["temperature_note"] = note
            if s != "train":
                curves[f"{tag} {s}"] = (y[m], p, w[m])
            if s == "validation":
                curves[f"{tag} {s}, T={temperature:.2f}"] = (
                    y[m],
                    sigmoid(z[m] / temperature),
                    w[m],
                )
        return out, curves, temperature

    z_rows = prm.predict_logits(
        ds,
        f["state_id"].to_numpy(),
        f["action"].to_numpy(),
        allow_other_actor=allow_other_actor,
        progress=progress,
    )
    metrics, curves, _ = per_split(z_rows[idx], prm.kind)
    fit_splits = set(prm.meta.get("fit_splits", ["train"]))
    for s in metrics:
        metrics[s]["in_sample"] = s in fit_splits
    if baseline and prm.kind != "tabular":
        from prm.tabular import TabularPRM

        bex = build_examples(ds, splits, label_source=prm.meta.get("label_source", "auto"))
        tab = TabularPRM.fit(
            ds, bex.select(sorted(fit_splits)), meta={"actor": prm.actor, "actions": prm.actions}
        )
        zb = tab.predict_logits(
            ds, f["state_id"].to_numpy(), f["action"].to_numpy(), allow_other_actor=True
        )
        bmetrics, bcurves, _ = per_split(zb[idx], "tabular baseline")
        for s in metrics:
            if s in bmetrics:
                metrics[s]["baseline"] = bmetrics[s]
        curves.update({k: v for k, v in bcurves.items() if k.endswith("validation")})
    return metrics, curves


def report(cfg) -> dict:
    """Evaluate ``cfg.prm_dir`` on ``cfg.data``, print the table and the JSON line, write
    the reliability diagram; returns the JSON object."""

    cfg = as_config(ReportConfig, cfg)
    ds = load_dataset(cfg.data)
    prm = load_prm(cfg.prm_dir, device=cfg.device)
    metrics, curves = prm_metrics(
        prm,
        ds,
        n_bins=cfg.n_bins,
        allow_other_actor=cfg.allow_other_actor,
        baseline=cfg.baseline,
        progress=cfg.progress,
    )
    plot = Path(cfg.plot) if cfg.plot else Path(cfg.prm_dir) / "reliability.png"
    reliability_diagram(
        curves, plot, n_bins=cfg.n_bins, title=f"{prm.source} on {Path(cfg.data).name}"
    )
    print(f"PRM {prm.source} on {cfg.data} (temperature fitted on validation, kept only where")
    print("it lowers the ECE of one half of the validation tasks fitted on the other)")
    print(
        f"{'split':<11} {'model':<9} {'auroc':>7} {'brier':>7} {'ece':>7} {'ece_T':>7} {'T':>6}  visits"
    )
    for s, m in metrics.items():
        rows = [(prm.kind, m)] + ([("tabular", m["baseline"])] if "baseline" in m else [])
        for name, r in rows:
            tag = " (in-sample)" if m["in_sample"] else ""
            print(
                f"{s:<11} {name:<9} {r['auroc']:7.4f} {r['brier']:7.4f} {r['ece']:7.4f} "
                f"{r['ece_scaled']:7.4f} {r['temperature']:6.3f}  {r['weight']:.0f}{tag}"
            )
    for s, m in metrics.items():
        if s == "validation":
            print(f"temperature ({prm.kind}): {m['temperature_note']}")
            if "baseline" in m:
                print(f"temperature (tabular): {m['baseline']['temperature_note']}")
    print(f"reliability diagram -> {plot}")
    out = _clean(metrics)
    print(json.dumps(out))
    return out


def main() -> None:
    """Command line: ``key=value`` overrides of conf/prm_report.yaml (fields: --help)."""
    run_app("prm.report", ReportConfig, report, config_name="prm_report")


if __name__ == "__main__":
    sys.exit(main())
