"""What a helper directory tells transformers beyond its weights, written from helper.json.

``config.json`` gets the decision rule (``helper_decision``: mode, budgets, thresholds,
tie weights, state header, window), ``custom_pipelines`` (the task ``text-classification``
is :class:`helpdp.helper.pipeline.HelperPipeline`) and ``auto_map`` (the config and model
classes), all three pointing at ``helpdp_helper.py``, a two-line module beside it that
imports them from helpdp (which must be installed). So::

    pipeline("text-classification", model=HELPER, trust_remote_code=True)
    pipeline(model=HELPER, trust_remote_code=True)

decide as ``HelperPolicy(HELPER)`` does, at the budget given with ``budget=`` (a plain
``pipeline("text-classification", model=HELPER)`` refuses, asking for
``trust_remote_code``, rather than answering with the most likely class). Rewritten with
the model card whenever helper.json is (:func:`helpdp.helper.card.write_card`), so a
recalibrated helper's pipeline uses its new thresholds. No heavy import here.
"""

from __future__ import annotations

import json
from pathlib import Path

MODULE = "helpdp_helper"
MODULE_TEXT = '''"""helpdp's helper for transformers' trust_remote_code: the pipeline that decides as
helpdp.helper.HelperPolicy does, and the model's classes (needs helpdp installed)."""

from helpdp.helper.pipeline import HelperPipeline  # noqa: F401
from helpdp.models.hf_helper import HelperConfig, HelperForSequenceClassification  # noqa: F401
'''
RULE_KEYS = ("mode", "budgets", "thresholds", "tie_weights", "state_header")


def decision_rule(meta: dict) -> dict:
    """The part of helper.json ``meta`` that decides: what the pipeline reads."""
    cfg = meta.get("config") or {}
    rule = {k: meta.get(k) for k in RULE_KEYS}
    rule["state_header"] = bool(rule["state_header"])
    rule["max_length"] = int(cfg["max_length"])
    rule["head_tokens"] = int(cfg["head_tokens"])
    return rule


def write_transformers_config(out: Path, meta: dict) -> list[Path]:
    """Update ``out/config.json`` (a format-2 helper's; module docstring) and write
    ``helpdp_helper.py``; returns the files written (none for a format-1 directory)."""
    out = Path(out)
    path = out / "config.json"
    if not path.is_file():
        return []
    config = json.loads(path.read_text())
    if config.get("model_type") != "helpdp-helper":
        return []
    config["helper_decision"] = decision_rule(meta)
    config["custom_pipelines"] = {
        "text-classification": {
            "impl": f"{MODULE}.HelperPipeline",
            "pt": ["AutoModelForSequenceClassification"],
            "tf": [],
            "type": "text",
        }
    }
    config["auto_map"] = {
        "AutoConfig": f"{MODULE}.HelperConfig",
        "AutoModelForSequenceClassification": f"{MODULE}.HelperForSequenceClassification",
    }
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    module = out / f"{MODULE}.py"
    module.write_text(MODULE_TEXT)
    return [path, module]
