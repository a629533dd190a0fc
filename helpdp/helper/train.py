"""`python -m helpdp.helper.train labels=LABELS helper=tiny|minilm|qwen3_0_6b|qwen3_4b out=DIR`

Fits the helper (paper Sec. 6): a text classifier over the state's text (the
rendering the PRM reads, states.parquet ``text``) with K + 1 classes, trained on
the DP's labels (``python -m helpdp.label``) of the **train tasks only**.

**One helper for every budget** (``mode=threshold``, the default). The labels of
all budgets are pooled into one example per state whose soft target is the
average, over budgets, of the label mixture's action distribution; the model's
help score ``1 - P(nohelp)`` is then an *ordinal* score: high where the DP helps
even at small budgets, low where it helps only at large ones. A threshold per
budget is picked on the validation tasks, where the helper's help rate matches
the DP labels' help rate at that budget; thresholds are made non-increasing in
the budget, and a deployment budget between two trained ones interpolates them.
Why this rather than writing the budget into the input (``mode=prefix``, also
implemented: one example per (state, budget), text prefixed with
``[budget=C]``): (1) ``helper.budget`` changes the behaviour monotonically by
construction (a larger budget can only lower the threshold), which a budget-
conditioned classifier does not guarantee on unseen states; (2) any budget, not
only the trained ones, can be deployed; (3) it is the paper's own structure: the
DP helps iff a state's gain ratio exceeds r, a threshold on a per-state score.
The price is that it cannot represent a state whose help decision flips back
and forth as the budget grows (rare: the frontier's policies are nearly nested).

Training uses ``transformers.Trainer`` (``helpdp.helper.trainer``, the loop the
LM PRM shares: AdamW, linear schedule with warm-up, progress bars) on ``HelperNet`` (``helpdp.helper.model``), whose loss is the
class-weighted soft cross-entropy (``class_weighting=balanced``: help labels are
a minority). The directory written holds ``helper.json`` (backbone, classes,
mode, budgets, thresholds, label source, metrics) and the network.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cliconf import run_app
from helpdp.helper.config import MODES, HelperModelConfig, HelperTrainConfig

HELPER_JSON = "helper.json"


def _as_cfg(schema, cfg):
    from omegaconf import OmegaConf

    base = OmegaConf.structured(schema)
    if cfg is None:
        return base
    if not OmegaConf.is_config(cfg) and not isinstance(cfg, dict):
        cfg = OmegaConf.structured(cfg)
    return OmegaConf.merge(base, cfg)


def _plain(cfg) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)


def budget_prefix(budget: float) -> str:
    return f"[budget={float(budget):g}] "


def class_names(labels: pd.DataFrame, meta: dict) -> list[str]:
    if meta.get("actions"):
        return list(meta["actions"])
    return [c.removeprefix("p_") for c in labels.columns if c.startswith("p_")]


def examples(labels: pd.DataFrame, classes: list[str], mode: str) -> pd.DataFrame:
    """Training examples: ``state_id, task_id, split, text, budget, target`` (a
    list of K + 1 probabilities). ``threshold``: one per state (targets averaged
    over budgets, ``budget`` NaN); ``prefix``: one per (state, budget)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    pcols = [f"p_{c}" for c in classes]
    if mode == "prefix":
        df = labels[["state_id", "task_id", "split", "text", "budget", *pcols]].copy()
        df["text"] = [budget_prefix(b) + t for b, t in zip(df["budget"], df["text"])]
    else:
        g = labels.groupby("state_id", sort=True)
        df = g[["task_id", "split", "text"]].first().reset_index()
        df[pcols] = g[pcols].mean().to_numpy()
        df["budget"] = np.nan
    df["target"] = list(df[pcols].to_numpy(np.float64))
    return df.drop(columns=pcols).reset_index(drop=True)


def pick_thresholds(scores_by_budget: dict, help_rate_by_budget: dict) -> dict:
    """Per budget, the threshold on the help score whose help rate (share of
    scores strictly above it) matches the labels' help rate; made non-increasing
    as the budget grows."""
    out, prev = {}, math.inf
    for b in sorted(scores_by_budget):
        s = np.sort(np.asarray(scores_by_budget[b], np.float64))
        h = float(help_rate_by_budget[b])
        n_help = int(round(h * len(s)))
        if len(s) == 0 or n_help <= 0:
            tau = 1.0
        elif n_help >= len(s):
            tau = -1.0
        else:  # midway between the last "no" and the first "help" score
            tau = 0.5 * (s[len(s) - n_help - 1] + s[len(s) - n_help])
        tau = min(tau, prev)
        out[float(b)] = float(tau)
        prev = tau
    return out


def soft_loss(probs: np.ndarray, target: np.ndarray, cw: np.ndarray) -> float:
    wy = target * cw
    return float(-(wy * np.log(np.clip(probs, 1e-12, 1))).sum() / max(wy.sum(), 1e-12))


def train_helper(labels: pd.DataFrame, meta: dict, cfg, out) -> dict:
    """Fit, pick thresholds, save to ``out``; returns the contents of helper.json."""
    import torch
    from omegaconf import OmegaConf

    from helpdp.helper.model import (
        Encoder,
        HelperNet,
        add_lora,
        build_backbone,
        class_weights,
        predict_proba,
        save_net,
    )
    from helpdp.helper.trainer import fit_with_trainer

    cfg = _as_cfg(HelperTrainConfig, cfg)
    mcfg = _plain(_as_cfg(HelperModelConfig, cfg.helper))
    t0 = time.perf_counter()
    out = Path(out)
    classes = class_names(labels, meta)
    all_budgets = sorted(float(b) for b in labels["budget"].unique())
    budgets = sorted(float(b) for b in cfg.budgets) if cfg.budgets else all_budgets
    missing = [b for b in budgets if b not in all_budgets]
    if missing:
        raise ValueError(f"budgets {missing} are not in the labels (they have {all_budgets})")
    labels = labels[labels["budget"].isin(budgets)]
    ex = examples(labels, classes, cfg.mode)
    train = ex[ex["split"].isin(list(cfg.train_splits))].reset_index(drop=True)
    if train.empty:
        raise ValueError(f"no label rows in train_splits {list(cfg.train_splits)}")
    if cfg.max_train_examples and len(train) > cfg.max_train_examples:
        train = train.sample(n=int(cfg.max_train_examples), random_state=int(mcfg["seed"]))
        train = train.reset_index(drop=True)
    val = ex[ex["split"].isin(list(cfg.val_splits or []))].reset_index(drop=True)

    torch.manual_seed(int(mcfg["seed"]))
    if mcfg.get("cpu_threads"):
        torch.set_num_threads(int(mcfg["cpu_threads"]))
    device = cfg.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    enc_model, tok, source = build_backbone(mcfg, train["text"].tolist())
    if mcfg.get("gradient_checkpointing"):
        enc_model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )
    enc_model = add_lora(enc_model, mcfg)
    y_train = np.stack(train["target"].to_numpy())
    cw = class_weights(y_train, mcfg["class_weighting"])
    net = HelperNet(
        enc_model, len(classes), pooling=mcfg["pooling"], dropout=float(mcfg["dropout"]),
        class_weight=cw,
    )  # fmt: skip
    net.to(device)
    encoder = Encoder(tok, mcfg["max_length"], mcfg["head_tokens"])
    seq_train = encoder(train["text"])
    seq_val = encoder(val["text"]) if len(val) else []

    def collate(rows):
        batch = encoder.collate([r["input_ids"] for r in rows])
        batch["labels"] = torch.tensor(np.stack([r["labels"] for r in rows]), dtype=torch.float32)
        return batch

    bs = int(mcfg["batch_size"])
    total = math.ceil(len(train) / bs) * float(mcfg["epochs"])
    ebs = int(mcfg["eval_batch_size"])
    p_before = predict_proba(net, encoder, seq_train, batch_size=ebs, device=device)
    trainer = fit_with_trainer(
        net,
        [{"input_ids": s, "labels": y} for s, y in zip(seq_train, y_train, strict=True)],
        collate,
        epochs=float(mcfg["epochs"]),
        batch_size=bs,
        lr=float(mcfg["lr"]),
        weight_decay=float(mcfg["weight_decay"]),
        warmup_ratio=float(mcfg["warmup_ratio"]),
        seed=int(mcfg["seed"]),
        cpu=device == "cpu",
        bf16=bool(mcfg.get("bf16")),
        progress=cfg.progress,
        logging_steps=max(1, int(total // 20)),
    )
    net.eval()
    p_train = predict_proba(net, encoder, seq_train, batch_size=ebs, device=device)
    metrics = {
        "train_examples": len(train),
        "val_examples": len(val),
        "class_weight": cw.tolist(),
        "train_loss_before": soft_loss(p_before, y_train, cw),
        "train_loss_after": soft_loss(p_train, y_train, cw),
        "train_accuracy": float((p_train.argmax(1) == y_train.argmax(1)).mean()),
        "log_history": [h for h in trainer.state.log_history if "loss" in h],
    }
    p_val = None
    if len(val):
        y_val = np.stack(val["target"].to_numpy())
        p_val = predict_proba(net, encoder, seq_val, batch_size=ebs, device=device)
        metrics["val_loss"] = soft_loss(p_val, y_val, cw)
        metrics["val_accuracy"] = float((p_val.argmax(1) == y_val.argmax(1)).mean())
        metrics["val_majority_accuracy"] = float(
            (y_val.argmax(1) == np.bincount(y_train.argmax(1)).argmax()).mean()
        )
    thresholds, threshold_split = None, None
    if cfg.mode == "threshold":
        # per budget: the states of the calibration rows and the labels' help rate
        cal_splits = list(cfg.val_splits or []) if len(val) else list(cfg.train_splits)
        threshold_split = cal_splits
        cal_ex, p_cal = (val, p_val) if len(val) else (train, p_train)
        score_of = pd.Series(1.0 - p_cal[:, 0], index=cal_ex["state_id"].to_numpy())
        cal = labels[labels["split"].isin(cal_splits)]
        scores, rates = {}, {}
        for b, g in cal.groupby("budget"):
            scores[float(b)] = score_of.reindex(g["state_id"].to_numpy()).dropna().to_numpy()
            rates[float(b)] = float((1.0 - g[f"p_{classes[0]}"]).mean())
        thresholds = pick_thresholds(scores, rates)
        metrics["calibration_help_rate"] = rates
        per_budget = {}
        for b, g in cal.groupby("budget"):
            s = score_of.reindex(g["state_id"].to_numpy()).to_numpy()
            pred = s > thresholds[float(b)]
            per_budget[float(b)] = {
                "help_rate": float(pred.mean()),
                "label_help_rate": rates[float(b)],
                "decision_accuracy": float((pred == (g["label"].to_numpy() > 0)).mean()),
            }
        metrics["per_budget"] = per_budget
    helper_meta = {
        "format": 1,
        "backbone": mcfg["backbone"],
        "source": source,
        "classes": classes,
        "mode": cfg.mode,
        "budgets": budgets,
        "thresholds": None if thresholds is None else {f"{b:g}": t for b, t in thresholds.items()},
        "threshold_splits": threshold_split,
        "label_source": {
            "labels": None if OmegaConf.is_missing(cfg, "labels") else str(cfg.labels),
            "data": meta.get("data"),
            "strategy": meta.get("strategy"),
            "rule": meta.get("rule"),
            "search_splits": meta.get("search_splits"),
            "train_splits": list(cfg.train_splits),
        },
        "config": mcfg,
        "metrics": metrics,
        "seconds": time.perf_counter() - t0,
    }
    out.mkdir(parents=True, exist_ok=True)
    save_net(net, tok, out)
    (out / HELPER_JSON).write_text(json.dumps(helper_meta, indent=2, default=float) + "\n")
    return helper_meta


def run_train(cfg) -> dict:
    """The body of ``python -m helpdp.helper.train``."""
    from helpdp.label import read_labels

    labels, meta = read_labels(cfg.labels)
    res = train_helper(labels, meta, cfg, cfg.out)
    m = res["metrics"]
    print(
        f"helper ({res['backbone']}, mode={res['mode']}) -> {cfg.out}: train loss "
        f"{m['train_loss_before']:.4f} -> {m['train_loss_after']:.4f}, train acc "
        f"{m['train_accuracy']:.3f}, val acc {m.get('val_accuracy', float('nan')):.3f} "
        f"(majority {m.get('val_majority_accuracy', float('nan')):.3f}), "
        f"thresholds {res['thresholds']}  [{res['seconds']:.1f}s]"
    )
    return res


def main() -> None:
    run_app(
        "helpdp.helper.train",
        HelperTrainConfig,
        run_train,
        config_name="helper_train",
        groups={"helper": HelperModelConfig},
    )


if __name__ == "__main__":
    main()
