"""The model card (``README.md``) of a helper directory, written from its helper.json.

Short and factual: what the model is, how to load it (the project's loader and
``AutoModelForSequenceClassification``), its labels, budgets with their thresholds
and validation usage, its validation metrics against the majority class, where its
labels came from, and the warnings of :mod:`helpdp.helper.quality`. Rewritten whenever
helper.json is (training, ``recalibrate``, ``helpdp.evaluate.calibrate``), with the
decision rule and pipeline that ``config.json`` names (:mod:`helpdp.helper.export`).
"""

from __future__ import annotations

import math
from pathlib import Path

CARD = "README.md"


def _num(x, fmt: str = ".3f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format(float(x), fmt)


def model_card(meta: dict) -> str:
    """The card's Markdown for helper.json contents ``meta``."""
    m = meta.get("metrics", {})
    src = meta.get("label_source", {})
    classes = list(meta.get("classes", []))
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: text-classification",
        "tags: [helpdp, helper]",
        "---",
        "",
        f"# helpdp helper ({meta.get('backbone')}, mode={meta.get('mode')})",
        "",
        "Decides, from an agent's state text, whether to call the expert "
        "(`1 - P(nohelp)` against a per-budget threshold). Trained by "
        "`python -m helpdp.helper.train` on the budgeted DP's labels.",
        "",
        "```python",
        'HELPER = "path/to/this/directory"',
        "from helpdp.helper import HelperPolicy        # decisions at a budget",
        "policy = HelperPolicy(HELPER, budget=1.0)",
        "from transformers import pipeline             # the same decisions (helpdp installed)",
        "pipe = pipeline(model=HELPER, trust_remote_code=True)",
        'pipe(state_text, budget=1.0)                   # {"label": ..., "probabilities": ...}',
        "import helpdp.models.hf_helper                # registers model_type helpdp-helper",
        "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
        "model = AutoModelForSequenceClassification.from_pretrained(HELPER)",
        "tok = AutoTokenizer.from_pretrained(HELPER)",
        'probs = model(**tok(texts, padding=True, return_tensors="pt")).logits.softmax(-1)',
        "```",
        "",
        "Tokenize without truncation: the model cuts a longer input to its first and last "
        "tokens itself, as the helper was trained (`truncation=True` keeps only the first). "
        "The label with the highest probability is not the decision: that is "
        "`1 - P(nohelp)` against the budget's threshold (the pipeline, or `HelperPolicy`).",
        "",
        f"Labels (id2label): {', '.join(f'{i}={c}' for i, c in enumerate(classes))}.",
        "",
    ]
    thresholds = meta.get("thresholds") or {}
    if thresholds:
        usage = m.get("calibration_usage") or {}
        ties = meta.get("tie_weights") or {}
        lines += [
            f"Thresholds ({meta.get('calibration')}, on {meta.get('threshold_splits')}):",
            "",
            "| budget | threshold | tie weight | validation calls/episode |",
            "|---|---|---|---|",
        ]
        for b, t in sorted(thresholds.items(), key=lambda x: float(x[0])):
            u = next((c["usage"] for k, c in usage.items() if float(k) == float(b)), None)
            lines.append(f"| {b} | {_num(t, '.4f')} | {_num(ties.get(b), '.3f')} | {_num(u)} |")
        lines.append("")
    else:
        lines += [f"Budgets (written in the input): {meta.get('budgets')}.", ""]
    lines += [
        "Validation metrics (hard label: the soft target's argmax):",
        "",
        "| | helper | majority class |",
        "|---|---|---|",
        f"| accuracy | {_num(m.get('val_accuracy'))} | {_num(m.get('val_majority_accuracy'))} |",
        f"| balanced accuracy | {_num(m.get('val_balanced_accuracy'))} | "
        f"{_num(m.get('val_majority_balanced_accuracy'))} |",
        f"| AUROC (help) | {_num(m.get('val_auroc'))} | {_num(m.get('val_majority_auroc'))} |",
        "",
        f"{m.get('train_examples')} training and {m.get('val_examples')} validation examples; "
        f"train loss {_num(m.get('train_loss_before'), '.4f')} -> "
        f"{_num(m.get('train_loss_after'), '.4f')}.",
        f"Labels: `{src.get('labels')}` (data `{src.get('data')}`, strategy "
        f"{src.get('strategy')}, rule {src.get('rule')}, train splits {src.get('train_splits')}).",
        "",
    ]
    warnings = m.get("warnings") or []
    if warnings:
        lines += ["Warnings:", "", *[f"- {w}" for w in warnings], ""]
    return "\n".join(lines)


def write_card(out: Path, meta: dict) -> Path:
    """Write ``out/README.md``, and the decision rule and pipeline into ``out/config.json``
    (:func:`helpdp.helper.export.write_transformers_config`)."""
    from helpdp.helper.export import write_transformers_config

    path = Path(out) / CARD
    path.write_text(model_card(meta))
    write_transformers_config(out, meta)
    return path
