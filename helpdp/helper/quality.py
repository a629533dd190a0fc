"""Whether a helper learned anything: the numbers and the warnings of ``helper.train``.

A helper fitted with ``class_weighting=balanced`` against labels that mostly say
``nohelp`` can score below always predicting the majority class and still rank
states usefully, or learn nothing at all; plain accuracy does not tell which.
:func:`classification_metrics` reports, on the validation examples (hard label: each
soft target's argmax), the accuracy, the **balanced accuracy** (mean recall over the
classes present), the **AUROC** of the help score ``1 - P(nohelp)`` against "the DP
helps" (0.5: no ranking), and the same for the **majority-class baseline** (always
the training targets' most common class: balanced accuracy ``1 / classes present``,
AUROC 0.5). :func:`fit_warnings` turns them, and the calibration's usage per budget,
into one-line warnings (stored in helper.json ``metrics.warnings``, printed, and in
the model card).
"""

from __future__ import annotations

import math

import numpy as np

#: a calibrated budget's validation usage (calls per episode) "misses" the budget when
#: it is off by more than this share of the budget (and 0.01 calls)
USAGE_TOLERANCE = 0.05


def balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean over the classes present in ``y`` of the share of their rows predicted right."""
    y, pred = np.asarray(y), np.asarray(pred)
    classes = np.unique(y)
    if not len(classes):
        return math.nan
    return float(np.mean([(pred[y == c] == c).mean() for c in classes]))


def classification_metrics(p: np.ndarray, target: np.ndarray, majority: int) -> dict:
    """``accuracy``, ``balanced_accuracy``, ``auroc`` (help score vs help label; NaN
    when one side is empty) of class probabilities ``p`` (n, K + 1) against soft
    targets (their argmax), and ``majority_*`` of always predicting class ``majority``."""
    from prm.metrics import auroc

    y = np.asarray(target).argmax(1)
    pred = np.asarray(p).argmax(1)
    helps = (y != 0).astype(float)
    both = 0 < helps.sum() < len(helps)
    return {
        "accuracy": float((pred == y).mean()) if len(y) else math.nan,
        "balanced_accuracy": balanced_accuracy(y, pred),
        "auroc": auroc(helps, 1.0 - np.asarray(p)[:, 0]) if both else math.nan,
        "majority_class": int(majority),
        "majority_accuracy": float((y == majority).mean()) if len(y) else math.nan,
        "majority_balanced_accuracy": balanced_accuracy(y, np.full(len(y), majority)),
        "majority_auroc": 0.5 if both else math.nan,
    }


def fit_warnings(metrics: dict) -> list[str]:
    """One line per sign that the helper learned nothing or misses its budget: validation
    accuracy and balanced accuracy not above the majority class's, AUROC not above 0.5,
    and per budget a calibrated usage off the budget by more than ``USAGE_TOLERANCE``."""
    out = []
    acc, base = metrics.get("val_accuracy"), metrics.get("val_majority_accuracy")
    bal, bbase = metrics.get("val_balanced_accuracy"), metrics.get("val_majority_balanced_accuracy")
    if acc is not None and base is not None and acc <= base:
        beats = bal is not None and bbase is not None and bal > bbase
        out.append(
            f"validation accuracy {acc:.3f} does not beat the majority class ({base:.3f}); "
            f"balanced accuracy {bal:.3f} vs {bbase:.3f}"
            + (" (it ranks better than chance)" if beats else ": it learned nothing usable")
        )
    elif bal is not None and bbase is not None and bal <= bbase:
        out.append(
            f"validation balanced accuracy {bal:.3f} does not beat the majority class ({bbase:.3f})"
        )
    auc = metrics.get("val_auroc")
    if auc is not None and not math.isnan(auc) and auc <= 0.5:
        out.append(f"validation AUROC {auc:.3f}: the help score ranks states no better than chance")
    for b, c in sorted((metrics.get("calibration_usage") or {}).items(), key=lambda x: float(x[0])):
        b, u = float(b), float(c["usage"])
        if abs(u - b) > max(USAGE_TOLERANCE * b, 0.01):
            why = "it helps at every state it can" if u < b else "it spends more at any threshold"
            out.append(
                f"budget {b:g}: validation usage {u:.3f} calls/episode misses the budget ({why})"
            )
    return out
