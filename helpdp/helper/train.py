"""`python -m helpdp.helper.train labels=LABELS helper=tiny|minilm|qwen3_0_6b|qwen3_4b out=DIR`

Fits the helper (paper Sec. 6): a text classifier over the state's text (the
rendering the PRM reads, states.parquet ``text``) with K + 1 classes, trained on
the DP's labels (``python -m helpdp.label``) of the **train tasks only**.

**One helper for every budget** (``mode=threshold``, the default). The labels of
all budgets are pooled into one example per state whose soft target is the
average, over budgets, of the label mixture's action distribution; the model's
help score ``1 - P(nohelp)`` is then an *ordinal* score: high where the DP helps
even at small budgets, low where it helps only at large ones. A threshold per
budget is picked on the validation tasks (``calibration=usage``, the default):
the thresholded helper is evaluated **as a policy** on the validation tasks'
count model (``helpdp.forecast.policy_value``; where its action was never observed
at a state, the data's behaviour carries on) and the threshold is the one at
which its expected calls per episode equal the budget (:func:`usage_thresholds`);
states that share the boundary score are helped with a probability
(``tie_weights``, drawn per state at deployment), so usage is continuous in the
threshold even where many states share a score. The budget is what is spent, so
budgets 0.5 / 1 / 2 get three thresholds even when the DP labels of the three
budgets differ little. (``calibration=help_rate``, the earlier method, matched
the helper's help rate over validation *states* to the labels' help rate; on
the demo its three thresholds coincided, so ``helper.budget`` changed nothing.)
Thresholds are non-increasing in the budget, and a deployment budget between
two trained ones interpolates them. :func:`recalibrate` re-picks a saved
helper's thresholds without retraining.
Why this rather than writing the budget into the input (``mode=prefix``, also
implemented: one example per (state, budget), text prefixed with
``[budget=C]``): (1) ``helper.budget`` changes the behaviour monotonically by
construction (a larger budget can only lower the threshold), which a budget-
conditioned classifier does not guarantee on unseen states; (2) any budget, not
only the trained ones, can be deployed; (3) it is the paper's own structure: the
DP helps iff a state's gain ratio exceeds r, a threshold on a per-state score.
The price is that it cannot represent a state whose help decision flips back
and forth as the budget grows (rare: the frontier's policies are nearly nested).

Training uses ``transformers.Trainer`` (``helpdp.models.trainer``, the loop the
LM PRM shares: AdamW, linear schedule with warm-up, progress bars) on ``HelperNet`` (``helpdp.models.encoder``), whose loss is the
class-weighted soft cross-entropy (``class_weighting=balanced``: help labels are
a minority). Against the DP's noisy labels, ``example_weight=visits`` weights each
state by its visits in the data and ``min_visits`` drops states seen too rarely
(docs/results/README.md, run 3: the helper then fits mostly the well-estimated early states).
The directory written is a transformers checkpoint (``config.json``, ``model.safetensors``,
the tokenizer: :mod:`helpdp.models.hf_helper`) with ``helper.json`` (backbone, classes,
mode, budgets, thresholds, label source, metrics) and the model card ``README.md``
(:mod:`helpdp.helper.card`) beside it. The metrics include the validation balanced
accuracy, the help score's AUROC and the majority-class baseline; a helper that does
not beat the majority class, or a budget whose validation usage misses it, is warned
about (:mod:`helpdp.helper.quality`).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from helpdp.cliconf import run_app, to_dict
from helpdp.data import load_dataset
from helpdp.demo import demo_dataset_path
from helpdp.forecast import PolicyValue, policy_value
from helpdp.helper.card import write_card
from helpdp.helper.config import EXAMPLE_WEIGHTS, MODES, HelperModelConfig, HelperTrainConfig
from helpdp.helper.features import (
    budget_prefix,
    help_probability,
    helper_input,
    round_scores,
)
from helpdp.helper.policy import HelperPolicy
from helpdp.helper.quality import classification_metrics, fit_warnings
from helpdp.label import read_labels
from helpdp.models.trainer import Optimisation, Reporting, fit_with_trainer
from helpdp.subset import task_subset

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from helpdp.models.encoder import Encoder, HelperNet

HELPER_JSON = "helper.json"


def _as_cfg(schema, cfg):
    from omegaconf import OmegaConf

    base = OmegaConf.structured(schema)
    if cfg is None:
        return base
    if not OmegaConf.is_config(cfg) and not isinstance(cfg, dict):
        cfg = OmegaConf.structured(cfg)
    return OmegaConf.merge(base, cfg)


def class_names(labels: pd.DataFrame, meta: dict) -> list[str]:
    if meta.get("actions"):
        return list(meta["actions"])
    return [c.removeprefix("p_") for c in labels.columns if c.startswith("p_")]


def examples(
    labels: pd.DataFrame,
    classes: list[str],
    mode: str,
    weight: str = "uniform",
    header: bool = False,
) -> pd.DataFrame:
    """Training examples: ``state_id, task_id, split, text, budget, target`` (a
    list of K + 1 probabilities) and ``weight``. ``threshold``: one per state
    (targets averaged over budgets, ``budget`` NaN); ``prefix``: one per (state,
    budget). ``weight``: ``uniform`` (1 each) or ``visits`` (the state's visits in
    the data, the labels' ``visits`` column, scaled to mean 1 over the rows);
    ``visits`` is carried when the labels have it. ``header``: each text is put
    behind ``features.state_header`` (needs the labels' ``depth``), before any
    budget prefix."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if weight not in EXAMPLE_WEIGHTS:
        raise ValueError(f"example_weight must be one of {EXAMPLE_WEIGHTS}, got {weight!r}")
    if weight == "visits" and "visits" not in labels.columns:
        raise ValueError("example_weight=visits: the labels have no 'visits' column")
    if header and "depth" not in labels.columns:
        raise ValueError("state_header: the labels have no 'depth' column (the state's turn)")
    pcols = [f"p_{c}" for c in classes]
    extra = ["visits"] if "visits" in labels.columns else []
    extra += ["depth"] if header else []
    if mode == "prefix":
        df = labels[["state_id", "task_id", "split", "text", "budget", *extra, *pcols]].copy()
    else:
        g = labels.groupby("state_id", sort=True)
        df = g[["task_id", "split", "text", *extra]].first().reset_index()
        df[pcols] = g[pcols].mean().to_numpy()
        df["budget"] = np.nan
    if header:  # once per example, before any budget prefix
        df["text"] = [helper_input(t, d, True) for t, d in zip(df["text"], df.pop("depth"))]
    if mode == "prefix":
        df["text"] = [budget_prefix(b) + t for b, t in zip(df["budget"], df["text"])]
    df["target"] = list(df[pcols].to_numpy(np.float64))
    w = df["visits"].to_numpy(np.float64) if weight == "visits" else np.ones(len(df))
    df["weight"] = w / w.mean() if len(df) and w.mean() > 0 else w
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


CALIBRATIONS = ("usage", "help_rate")


def thresholded_rows(mdp, h: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row policy of "help (intervention ``action[s]``) with probability ``h[s]``,
    else nohelp" on ``mdp``, and per state the probability mass that fell on an
    action never observed there, which is given the data's behaviour at that state
    instead (the fallback of ``helpdp.forecast.transfer_policy``)."""
    n = mdp.n_states
    row_state = np.repeat(np.arange(n), np.diff(mdp.sa_ptr))
    a = mdp.sa_action.astype(np.int64)
    want = np.where(a == 0, 1.0 - h[row_state], np.where(a == action[row_state], h[row_state], 0.0))
    covered = np.bincount(row_state, weights=want, minlength=n)
    missing = np.where(np.diff(mdp.sa_ptr) > 0, np.clip(1.0 - covered, 0.0, 1.0), 0.0)
    totals = np.bincount(row_state, weights=mdp.sa_count, minlength=n)
    behaviour = mdp.sa_count / np.maximum(totals[row_state], 1)
    return want + missing[row_state] * behaviour, missing


def usage_thresholds(
    mdp,
    score: np.ndarray,
    budgets,
    *,
    gamma: float,
    action: np.ndarray | None = None,
    iters: int = 40,
) -> dict[float, dict]:
    """Per budget, the threshold on ``score`` (one per internal state of ``mdp``;
    NaN where there is nothing to decide) at which the thresholded policy makes
    ``budget`` expert calls per episode on ``mdp``, evaluated as a policy
    (``helpdp.forecast.policy_value``: start states weighted by their episodes).

    The calls counted are the policy's own decisions (``h`` summed over the states
    it visits); where its action was never observed at a state, the next state
    follows the data's behaviour there (``fallback``: expected such visits per
    episode). The score's distinct values (at ``SCORE_DECIMALS``) are levels; a
    position ``t`` in ``[0, L]`` helps at the ``floor(t)`` highest levels and with
    probability ``t - floor(t)`` at the next one, so usage is continuous in ``t``
    even when many states share a score. ``t`` is the largest one whose usage is
    at most the budget (bisection; usage grows with ``t``), made non-decreasing in
    the budget. Returns ``{budget: {threshold, tie_weight, usage, model_usage,
    success, fallback}}``: help iff score > threshold, with probability
    ``tie_weight`` at score == threshold.
    """

    score = np.asarray(score, np.float64)
    if score.shape != (mdp.n_states,):
        raise ValueError(f"one score per state ({mdp.n_states}), got {score.shape}")
    action = np.ones(mdp.n_states, np.int64) if action is None else np.asarray(action, np.int64)
    levels = np.unique(round_scores(score[~np.isnan(score)]))[::-1]  # highest first
    n_lv = len(levels)

    def at(t: float) -> tuple[float, float]:
        k = min(int(math.floor(t)), n_lv - 1)
        return float(levels[k]), float(min(t - k, 1.0))

    def value(t: float):
        tau, w = at(t)
        h = help_probability(score, tau, w)
        pi_row, missing = thresholded_rows(mdp, h, action)
        v = policy_value(mdp, pi_row, gamma=gamma, flag=h)
        fb = policy_value(mdp, pi_row, gamma=gamma, flag=missing).fallback
        return v, fb

    cache: dict[float, tuple[PolicyValue, float]] = {}

    def usage(t: float) -> float:
        if t not in cache:
            cache[t] = value(t)
        return cache[t][0].fallback  # F with flag = h: the policy's own calls

    out, t_prev = {}, 0.0
    for b in sorted(float(x) for x in budgets):
        if n_lv == 0:
            t = 0.0
        elif usage(float(n_lv)) <= b:
            t = float(n_lv)
        else:
            lo, hi = 0, n_lv  # usage(lo) <= b < usage(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if usage(float(mid)) <= b else (lo, mid)
            wl, wh = 0.0, 1.0
            for _ in range(iters):
                wm = 0.5 * (wl + wh)
                wl, wh = (wm, wh) if usage(lo + wm) <= b else (wl, wm)
            t = lo + wl
        t = max(t, t_prev)
        t_prev = t
        if n_lv == 0:
            out[b] = {
                "threshold": 1.0,
                "tie_weight": 0.0,
                "usage": 0.0,
                "model_usage": 0.0,
                "success": float("nan"),
                "fallback": 0.0,
            }
            continue
        usage(t)
        v, fb = cache[t]
        tau, w = at(t)
        out[b] = {
            "threshold": tau,
            "tie_weight": w,
            "usage": float(v.fallback),
            "model_usage": v.total_usage,
            "success": v.expected_success,
            "fallback": float(fb),
        }
    return out


def _calibration_dataset(meta: dict):
    """The dataset the labels were made from (``labels.json`` ``data``; null: the demo)."""

    if "data" not in meta:
        raise ValueError(
            "calibration=usage evaluates the thresholded helper on the calibration tasks' "
            "data, but the labels name no dataset (labels.json 'data'); use calibration=help_rate"
        )
    ds = load_dataset(meta["data"] or demo_dataset_path())
    return ds if "gamma" not in meta else load_dataset(ds.path, gamma=float(meta["gamma"]))


def calibrate_on_data(ds, tasks, budgets, proba) -> dict[float, dict]:
    """:func:`usage_thresholds` on the count model of ``tasks`` of ``ds``, the help
    score ``1 - P(nohelp)`` of ``proba(texts, depths) -> (n, K + 1)`` at every
    non-terminal state with an observed action (its text, as states.parquet renders
    it, and its turn), the intervention taken when helping its most likely one."""

    sub = task_subset(ds, list(tasks))
    mdp = sub.mdp
    has = (np.diff(mdp.sa_ptr) > 0) & ~np.asarray(mdp.terminal, bool)
    st = sub.states.set_index("state_id").reindex(sub.state_ids)
    text, depth = st["text"].astype(str).to_numpy(), st["depth"].to_numpy()
    score = np.full(mdp.n_states, np.nan)
    action = np.ones(mdp.n_states, np.int64)
    if has.any():
        p = np.asarray(proba(text[has].tolist(), depth[has].astype(int).tolist()), np.float64)
        score[has] = 1.0 - p[:, 0]
        action[has] = 1 + p[:, 1:].argmax(1)
    return usage_thresholds(mdp, score, budgets, gamma=sub.gamma, action=action)


def soft_loss(probs: np.ndarray, target: np.ndarray, cw: np.ndarray) -> float:
    wy = target * cw
    return float(-(wy * np.log(np.clip(probs, 1e-12, 1))).sum() / max(wy.sum(), 1e-12))


@dataclass
class _Net:
    """The helper network being trained, its tokenizer and input encoder, and where
    and how it is run."""

    net: HelperNet
    tok: PreTrainedTokenizerBase
    encoder: Encoder
    source: str
    class_weight: np.ndarray
    device: str
    batch_size: int

    def proba(self, seqs, desc: str | None = None) -> np.ndarray:
        """Class probabilities of encoded sequences (``predict_proba``); ``desc``: a bar
        with that label while they are scored."""
        from helpdp.models.encoder import predict_proba

        return predict_proba(
            self.net,
            self.encoder,
            seqs,
            batch_size=self.batch_size,
            device=self.device,
            progress=desc is not None,
            desc=desc or "helper",
        )


def _model_config(node) -> HelperModelConfig:
    """The ``helper`` group of the train config as a typed ``HelperModelConfig``."""
    from omegaconf import OmegaConf

    return OmegaConf.to_object(_as_cfg(HelperModelConfig, node))


def _budgets(labels: pd.DataFrame, wanted) -> list[float]:
    """The budgets to train on: ``wanted`` (each must be in the labels), else every one."""
    all_budgets = sorted(float(b) for b in labels["budget"].unique())
    budgets = sorted(float(b) for b in wanted) if wanted else all_budgets
    missing = [b for b in budgets if b not in all_budgets]
    if missing:
        raise ValueError(f"budgets {missing} are not in the labels (they have {all_budgets})")
    return budgets


def _train_val(ex: pd.DataFrame, cfg, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The examples fitted (``train_splits``, visited at least ``min_visits`` times, at
    most ``max_train_examples`` drawn with ``seed``) and the validation ones."""
    train = ex[ex["split"].isin(list(cfg.train_splits))].reset_index(drop=True)
    if train.empty:
        raise ValueError(f"no label rows in train_splits {list(cfg.train_splits)}")
    if cfg.min_visits > 1:
        if "visits" not in train.columns:
            raise ValueError("min_visits: the labels have no 'visits' column")
        train = train[train["visits"] >= int(cfg.min_visits)].reset_index(drop=True)
        if train.empty:
            raise ValueError(f"no train label row of a state visited >= {cfg.min_visits} times")
    if cfg.max_train_examples and len(train) > cfg.max_train_examples:
        train = train.sample(n=int(cfg.max_train_examples), random_state=int(seed))
        train = train.reset_index(drop=True)
    val = ex[ex["split"].isin(list(cfg.val_splits or []))].reset_index(drop=True)
    return train, val


def _torch_device(mcfg: HelperModelConfig, device: str) -> str:
    """Seed torch and set its CPU threads as ``mcfg`` says; ``device`` resolved (auto)."""
    import torch

    torch.manual_seed(int(mcfg.seed))
    if mcfg.cpu_threads:
        torch.set_num_threads(int(mcfg.cpu_threads))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _build_net(
    texts: list[str], n_classes: int, y_train: np.ndarray, mcfg: HelperModelConfig, device: str
) -> _Net:
    """The backbone (its tokenizer trained on ``texts`` when built from config), its LoRA
    adapters and the classification head, whose class weights come from ``y_train``."""
    from helpdp.models.encoder import Encoder, HelperNet, add_lora, build_backbone, class_weights

    config = to_dict(mcfg)  # the backbone builders read the config's dict
    enc_model, tok, source = build_backbone(config, texts)
    if mcfg.gradient_checkpointing:
        enc_model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )
    enc_model = add_lora(enc_model, config)
    cw = class_weights(y_train, mcfg.class_weighting)
    net = HelperNet(
        enc_model, n_classes, pooling=mcfg.pooling, dropout=float(mcfg.dropout), class_weight=cw
    )
    net.to(device)
    encoder = Encoder(tok, mcfg.max_length, mcfg.head_tokens)
    return _Net(net, tok, encoder, source, cw, device, int(mcfg.eval_batch_size))


def _fit(m: _Net, seq_train, y_train: np.ndarray, mcfg: HelperModelConfig, progress: bool):
    """Fit ``m.net`` with ``transformers.Trainer`` (``fit_with_trainer``); the trainer
    is returned, the network left in eval mode."""
    import torch

    def collate(rows):
        batch = m.encoder.collate([r["input_ids"] for r in rows])
        batch["labels"] = torch.tensor(np.stack([r["labels"] for r in rows]), dtype=torch.float32)
        return batch

    bs = int(mcfg.batch_size)
    total = math.ceil(len(seq_train) / bs) * float(mcfg.epochs)
    trainer = fit_with_trainer(
        m.net,
        [{"input_ids": s, "labels": y} for s, y in zip(seq_train, y_train, strict=True)],
        collate,
        Optimisation(
            epochs=float(mcfg.epochs),
            batch_size=bs,
            lr=float(mcfg.lr),
            weight_decay=float(mcfg.weight_decay),
            warmup_ratio=float(mcfg.warmup_ratio),
            seed=int(mcfg.seed),
        ),
        cpu=m.device == "cpu",
        bf16=bool(mcfg.bf16),
        report=Reporting(
            progress=progress,
            logging_steps=max(1, int(total // 20)),
            print_logs=False,
            desc="helper fit",
        ),
    )
    m.net.eval()
    return trainer


def _fit_metrics(m: _Net, trainer, p_before, p_train, y_train, val, p_val) -> dict:
    """Losses and accuracies before and after the fit, on the training and the
    validation examples (``p_val`` None when there are none)."""
    cw = m.class_weight
    metrics = {
        "train_examples": len(y_train),
        "val_examples": len(val),
        "class_weight": cw.tolist(),
        "train_loss_before": soft_loss(p_before, y_train, cw),
        "train_loss_after": soft_loss(p_train, y_train, cw),
        "train_accuracy": float((p_train.argmax(1) == y_train.argmax(1)).mean()),
        "log_history": [h for h in trainer.state.log_history if "loss" in h],
    }
    if p_val is not None:
        y_val = np.stack(val["target"].to_numpy())
        metrics["val_loss"] = soft_loss(p_val, y_val, cw)
        majority = int(np.bincount(y_train.argmax(1)).argmax())
        for k, v in classification_metrics(p_val, y_val, majority).items():
            metrics[f"val_{k}"] = v
    return metrics


@dataclass(frozen=True)
class _Run:
    """What one training run is given, read again by its calibration and its helper.json:
    the command's config (``cfg``), the model's (``mcfg``), the labels' meta, the classes
    and the budgets."""

    cfg: HelperTrainConfig
    mcfg: HelperModelConfig
    meta: dict
    classes: list[str]
    budgets: list[float]


@dataclass(frozen=True)
class _Calibration:
    """Threshold mode's result: per budget the help-score threshold and tie weight, and
    the splits of the examples they were picked on."""

    thresholds: dict
    tie_weights: dict
    splits: list


def _calibrate(
    run: _Run,
    m: _Net,
    labels: pd.DataFrame,
    cal_ex: pd.DataFrame,
    p_cal: np.ndarray,
    cal_splits: list,
    metrics: dict,
) -> _Calibration:
    """Threshold mode: per budget, the help-score threshold and tie weight (``calibration``
    usage or help_rate) picked on ``cal_ex`` (the calibration examples, in ``cal_splits``;
    ``p_cal`` their class probabilities); the calibration metrics go into ``metrics``."""
    cfg, classes = run.cfg, run.classes
    header = bool(cfg.state_header)
    # per budget: the states of the calibration rows and the labels' help rate
    score_of = pd.Series(1.0 - p_cal[:, 0], index=cal_ex["state_id"].to_numpy())
    cal = labels[labels["split"].isin(cal_splits)]
    scores, rates = {}, {}
    for b, g in cal.groupby("budget"):
        scores[float(b)] = score_of.reindex(g["state_id"].to_numpy()).dropna().to_numpy()
        rates[float(b)] = float((1.0 - g[f"p_{classes[0]}"]).mean())
    tie_weights = {b: 0.0 for b in rates}
    if cfg.calibration == "usage":
        cal_tasks = sorted(cal_ex["task_id"].unique())
        calib = calibrate_on_data(
            _calibration_dataset(run.meta),
            cal_tasks,
            run.budgets,
            lambda texts, depths: m.proba(
                m.encoder([helper_input(t, d, header) for t, d in zip(texts, depths)])
            ),
        )
        thresholds = {b: c["threshold"] for b, c in calib.items()}
        tie_weights = {b: c["tie_weight"] for b, c in calib.items()}
        metrics["calibration_usage"] = calib
    elif cfg.calibration == "help_rate":
        thresholds = pick_thresholds(scores, rates)
    else:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {cfg.calibration!r}")
    metrics["calibration_help_rate"] = rates
    per_budget = {}
    for b, g in cal.groupby("budget"):
        s = score_of.reindex(g["state_id"].to_numpy()).to_numpy()
        h = help_probability(s, thresholds[float(b)], tie_weights[float(b)])
        pred = h >= 0.5
        per_budget[float(b)] = {
            "help_rate": float(h.mean()),
            "label_help_rate": rates[float(b)],
            "decision_accuracy": float((pred == (g["label"].to_numpy() > 0)).mean()),
        }
    metrics["per_budget"] = per_budget
    return _Calibration(thresholds, tie_weights, cal_splits)


def _helper_meta(run: _Run, m: _Net, cal: _Calibration | None, metrics: dict, t0: float) -> dict:
    """The contents of helper.json (``cal``: None in prefix mode)."""
    from omegaconf import OmegaConf

    cfg, mcfg, meta = run.cfg, run.mcfg, run.meta
    thresholds = None if cal is None else cal.thresholds
    tie_weights = None if cal is None else cal.tie_weights
    tw_items = (tie_weights or {}).items()
    return {
        "format": 2,
        "backbone": mcfg.backbone,
        "source": m.source,
        "classes": run.classes,
        "mode": cfg.mode,
        "state_header": bool(cfg.state_header),
        "budgets": run.budgets,
        "thresholds": None if thresholds is None else {f"{b:g}": t for b, t in thresholds.items()},
        "tie_weights": None if tie_weights is None else {f"{b:g}": w for b, w in tw_items},
        "calibration": cfg.calibration if thresholds is not None else None,
        "threshold_splits": None if cal is None else cal.splits,
        "label_source": {
            "labels": None if OmegaConf.is_missing(cfg, "labels") else str(cfg.labels),
            "data": meta.get("data"),
            "strategy": meta.get("strategy"),
            "rule": meta.get("rule"),
            "search_splits": meta.get("search_splits"),
            "train_splits": list(cfg.train_splits),
        },
        "config": to_dict(mcfg),
        "metrics": metrics,
        "seconds": time.perf_counter() - t0,
    }


def _write_meta(out: Path, meta: dict) -> None:
    """helper.json and the model card (README.md) of ``out``."""
    (out / HELPER_JSON).write_text(json.dumps(meta, indent=2, default=float) + "\n")
    write_card(out, meta)


def _save(m: _Net, helper_meta: dict, out: Path) -> None:
    """Write the network as a transformers checkpoint (config.json, model.safetensors, the
    tokenizer), helper.json and the model card into ``out``, every file with the mode a
    new file gets here (the umask's: 0644 by default; safetensors writes 0600)."""
    from helpdp.models.encoder import save_net

    out.mkdir(parents=True, exist_ok=True)
    written = save_net(m.net, m.tok, out, list(helper_meta["classes"]), m.encoder)
    _write_meta(out, helper_meta)
    mode = (out / HELPER_JSON).stat().st_mode & 0o777
    for p in written:
        p.chmod(mode)


#: what ``run_train``'s first bar counts (``train_helper``'s ``stage`` names the next one)
STAGES = ("building the model", "encoding", "fitting", "calibrating", "saving")


def _announce(mcfg: HelperModelConfig, device: str, n_train: int, n_val: int, shown: bool):
    """The expected cost of the fit on stderr, where a rate for this backbone on this
    device was measured (``helpdp.cliconf.progress.RATES``: CPU, minilm)."""
    from helpdp.cliconf.progress import RATES, announce_cost

    key = f"helper.train.{mcfg.backbone}"
    if not shown or str(device) != "cpu" or f"{key}.fit" not in RATES:
        return
    epochs = float(mcfg.epochs)
    announce_cost(
        "helpdp.helper.train",
        {f"{key}.fit": n_train * epochs, f"{key}.score": 2 * n_train + 2 * n_val},
        f"{n_train} examples x {epochs:g} epochs, {n_val} validation",
    )


def train_helper(labels: pd.DataFrame, meta: dict, cfg, out, stage=None) -> dict:
    """Fit, pick thresholds, save to ``out``; returns the contents of helper.json.
    ``stage(name)``: called as each of ``STAGES`` begins."""
    stage = stage or (lambda name: None)
    cfg = _as_cfg(HelperTrainConfig, cfg)
    mcfg = _model_config(cfg.helper)
    t0 = time.perf_counter()
    classes = class_names(labels, meta)
    budgets = _budgets(labels, cfg.budgets)
    labels = labels[labels["budget"].isin(budgets)]
    ex = examples(labels, classes, cfg.mode, cfg.example_weight, bool(cfg.state_header))
    train, val = _train_val(ex, cfg, mcfg.seed)

    stage(STAGES[0])
    device = _torch_device(mcfg, cfg.device)
    # an example's weight scales its soft target: the loss (soft_cross_entropy, a
    # mean over sum_c w_c y_c) is then the example-weighted mean
    y_train = np.stack(train["target"].to_numpy()) * train["weight"].to_numpy()[:, None]
    m = _build_net(train["text"].tolist(), len(classes), y_train, mcfg, device)
    _announce(mcfg, device, len(train), len(val), cfg.progress)
    stage(STAGES[1])
    seq_train = m.encoder(train["text"])
    seq_val = m.encoder(val["text"]) if len(val) else []
    shown = (lambda d: d) if cfg.progress else (lambda d: None)
    p_before = m.proba(seq_train, shown("scoring train (before)"))
    stage(STAGES[2])
    trainer = _fit(m, seq_train, y_train, mcfg, cfg.progress)
    p_train = m.proba(seq_train, shown("scoring train"))
    p_val = m.proba(seq_val, shown("scoring validation")) if len(val) else None
    metrics = _fit_metrics(m, trainer, p_before, p_train, y_train, val, p_val)

    run = _Run(cfg, mcfg, meta, classes, budgets)
    cal = None
    stage(STAGES[3])
    if cfg.mode == "threshold":  # calibrated on the validation rows, else the training ones
        threshold_split = list(cfg.val_splits or []) if len(val) else list(cfg.train_splits)
        cal_ex, p_cal = (val, p_val) if len(val) else (train, p_train)
        cal = _calibrate(run, m, labels, cal_ex, p_cal, threshold_split, metrics)
    metrics["warnings"] = fit_warnings(metrics)
    helper_meta = _helper_meta(run, m, cal, metrics, t0)
    stage(STAGES[4])
    _save(m, helper_meta, Path(out))
    return helper_meta


def recalibrate(path, ds, tasks, budgets=None) -> dict:
    """Re-pick a saved threshold-mode helper's thresholds with ``calibration=usage``
    on ``tasks`` of ``ds`` (no retraining); rewrites its helper.json, returns it."""

    pol = HelperPolicy(path)
    if pol.mode != "threshold":
        raise ValueError(f"{path}: a prefix-mode helper has no thresholds")
    budgets = sorted(float(b) for b in (budgets or pol.budgets))
    calib = calibrate_on_data(ds, tasks, budgets, lambda t, d: pol.proba(t, depths=d))
    meta = dict(pol.meta)
    meta["thresholds"] = {f"{b:g}": c["threshold"] for b, c in calib.items()}
    meta["tie_weights"] = {f"{b:g}": c["tie_weight"] for b, c in calib.items()}
    meta["calibration"] = "usage"
    meta["metrics"] = {**meta.get("metrics", {}), "calibration_usage": calib}
    meta["metrics"]["warnings"] = fit_warnings(meta["metrics"])
    _write_meta(Path(path), meta)
    return meta


def run_train(cfg) -> dict:
    """The body of ``python -m helpdp.helper.train``."""

    from helpdp.cliconf.progress import Stages

    # the labels first (a second; their errors stay one line, before any bar), then a
    # labelled bar from the first second of the work: loading and encoding take minutes
    labels, meta = read_labels(cfg.labels)
    label = f"helpdp.helper.train helper={_model_config(cfg.helper).backbone}"
    with Stages(label, STAGES, cfg.progress) as stage:
        res = train_helper(labels, meta, cfg, cfg.out, stage=stage)
    m = res["metrics"]
    nan = float("nan")
    print(
        f"helper ({res['backbone']}, mode={res['mode']}) -> {cfg.out}: train loss "
        f"{m['train_loss_before']:.4f} -> {m['train_loss_after']:.4f}, train acc "
        f"{m['train_accuracy']:.3f}; validation: acc {m.get('val_accuracy', nan):.3f} "
        f"(majority {m.get('val_majority_accuracy', nan):.3f}), balanced acc "
        f"{m.get('val_balanced_accuracy', nan):.3f} (majority "
        f"{m.get('val_majority_balanced_accuracy', nan):.3f}), AUROC {m.get('val_auroc', nan):.3f}; "
        f"thresholds {res['thresholds']}  [{res['seconds']:.1f}s]"
    )
    for w in m.get("warnings", []):
        print(f"helper: warning: {w}", file=sys.stderr)
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
