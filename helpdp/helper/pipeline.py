"""A helper directory as a transformers pipeline that decides as :class:`HelperPolicy` does.

::

    from transformers import pipeline
    pipe = pipeline(model=HELPER, trust_remote_code=True)      # or "text-classification"
    pipe(state_text, budget=1.0)
    # {'label': 'expert', 'action': 1, 'score': 0.91, 'help_score': 0.91,
    #  'threshold': 0.42, 'budget': 1.0, 'probabilities': {'nohelp': 0.09, 'expert': 0.91}}

or, with helpdp imported (no remote code), ``HelperPipeline(model=model, tokenizer=tok)``
around a model and tokenizer loaded with ``from_pretrained``. An input is a state's text,
or ``{"text", "depth", "episode_id"}``: ``depth`` is needed by a helper trained with
``state_header``, and ``episode_id`` and ``depth`` draw the help at a score equal to the
threshold as ``HelperPolicy`` draws it (``uniform(seed, "helper", episode_id, depth)``).
The text goes through the project's encoder (its first ``head_tokens`` and last tokens,
:class:`helpdp.models.encoder.Encoder`), the decision rule is the config's
``helper_decision`` (:mod:`helpdp.helper.export`): ``label``/``action`` is the decision at
``budget`` (default: 1 if trained, else the middle trained budget), not the most likely
class; ``threshold=`` decides at a fixed help-score threshold instead (no tie draw).
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import Pipeline

from helpdp.helper.features import budget_prefix, helper_input
from helpdp.helper.policy import (
    budget_threshold,
    budget_tie_weight,
    default_budget,
    threshold_actions,
)
from helpdp.models.encoder import Encoder
from helpdp.policies import uniform


class HelperPipeline(Pipeline):
    """Decisions and class probabilities of a saved helper (module docstring)."""

    def __init__(self, model, *args, **kwargs):
        rule = getattr(model.config, "helper_decision", None)
        if not rule:
            raise ValueError(
                "this model's config has no helper_decision (a helper directory written by "
                "python -m helpdp.helper.train has one)"
            )
        self.rule = dict(rule)  # before the base class reads the call's parameters
        super().__init__(model, *args, **kwargs)
        self.encoder = Encoder(self.tokenizer, rule["max_length"], rule["head_tokens"])
        self.classes = [self.model.config.id2label[i] for i in range(self.model.config.num_labels)]

    def _sanitize_parameters(self, budget=None, threshold=None, seed=None, **kwargs):
        if kwargs:
            raise TypeError(f"HelperPipeline: unknown argument {sorted(kwargs)[0]!r}")
        b = default_budget(self.rule["budgets"]) if budget is None else float(budget)
        if self.rule["mode"] == "prefix":
            if threshold is not None:
                raise ValueError("a prefix-mode helper has no thresholds")
            if not any(abs(b - x) < 1e-9 for x in map(float, self.rule["budgets"])):
                raise ValueError(
                    "a prefix-mode helper decides only at its trained budgets "
                    f"{self.rule['budgets']}, not {b}"
                )
        pre = {"budget": b, "seed": int(seed or 0)}
        post = {"budget": b, "threshold": None if threshold is None else float(threshold)}
        return pre, {}, post

    def preprocess(self, inputs, budget: float = 1.0, seed: int = 0):
        if isinstance(inputs, str):
            inputs = {"text": inputs}
        if not isinstance(inputs, dict) or not isinstance(inputs.get("text"), str):
            raise ValueError(
                'HelperPipeline: an input is a state text or {"text": ..., "depth": ..., '
                '"episode_id": ...}'
            )
        text, depth = inputs["text"], inputs.get("depth")
        if self.rule["state_header"]:
            if depth is None:
                raise ValueError(
                    'this helper reads the state\'s turn (state_header): give {"text": ..., '
                    '"depth": ...}'
                )
            text = helper_input(text, int(depth), True)
        if self.rule["mode"] == "prefix":
            text = budget_prefix(budget) + text
        batch = self.encoder.collate(self.encoder([text]))
        draw = uniform(seed, "helper", inputs.get("episode_id"), depth)
        batch["tie_draw"] = torch.tensor([draw], dtype=torch.float64)
        return batch

    def _forward(self, model_inputs):
        draw = model_inputs.pop("tie_draw")
        logits = self.model(**model_inputs).logits
        return {"logits": logits, "tie_draw": draw}

    def postprocess(self, model_outputs, budget: float = 1.0, threshold=None):
        p = torch.softmax(model_outputs["logits"].float(), -1).cpu().numpy().reshape(1, -1)
        p = p.astype(np.float64)
        draw = float(model_outputs["tie_draw"].reshape(-1)[0])
        if self.rule["mode"] == "prefix":
            action, th = int(p.argmax(1)[0]), None
        else:
            if threshold is not None:
                th, tw = threshold, 0.0
            else:
                th, tw = budget_threshold(self.rule, budget), budget_tie_weight(self.rule, budget)
            action = int(threshold_actions(p, th, tw, [draw])[0])
        return {
            "label": self.classes[action],
            "action": action,
            "score": float(p[0, action]),
            "help_score": float(1.0 - p[0, 0]),
            "threshold": th,
            "budget": budget,
            "probabilities": dict(zip(self.classes, map(float, p[0]))),
        }
