"""A helper as a transformers model: ``HelperConfig`` + ``HelperForSequenceClassification``.

A helper directory (format 2) is a standard transformers checkpoint: ``config.json``
(``model_type: helpdp-helper``, the classes as ``id2label``, the encoder's own config
nested under ``helper_encoder``), ``model.safetensors`` (``encoder.*`` and ``head.*``), the
tokenizer files at the top level, and the project's ``helper.json`` and ``README.md``
(the model card) beside them. ``import helpdp.models.hf_helper`` registers the model
type, after which::

    AutoModelForSequenceClassification.from_pretrained(HELPER)  # HelperForSequenceClassification
    AutoTokenizer.from_pretrained(HELPER)

load it; ``logits`` are the K + 1 class scores (softmax: ``P(nohelp)``, ``P(expert)``, ...).
An input longer than the helper's window (``max_tokens``, the saved tokenizer's
``model_max_length``) is cut inside ``forward`` as the project's encoder cuts it: its first
``front_tokens`` and its last ``max_tokens - front_tokens`` real tokens ([CLS] and [SEP]
included), so ``model(**tokenizer(texts, padding=True, return_tensors="pt"))`` without
truncation gives the helper's probabilities on a state text (``truncation=True`` would
keep the first tokens only). The decisions at a budget: :mod:`helpdp.helper.pipeline`.
No standard class computes the helper's function (masked mean pooling over a BERT
encoder; ``BertForSequenceClassification`` pools the [CLS] token through a dense layer),
so the model type is the project's own, a ``PreTrainedModel`` subclass
(``save_pretrained``/``from_pretrained``, ``.to``, ``Trainer``), registered with the Auto
classes rather than shipped as remote code. The tokenizer needs no registration.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import SequenceClassifierOutput

MODEL_TYPE = "helpdp-helper"


class HelperConfig(PretrainedConfig):
    """The helper's config: ``helper_encoder`` (the backbone's config as a dict, with its
    ``model_type``), ``encoder_kwargs`` (extra constructor arguments, e.g.
    ``add_pooling_layer: false``), ``pooling`` (mean | last), the classes as labels and the
    input window: ``max_tokens`` and ``front_tokens`` (module docstring; ``None``: no cut)."""

    model_type = MODEL_TYPE

    def __init__(
        self,
        helper_encoder=None,
        encoder_kwargs=None,
        pooling="mean",
        max_tokens=None,
        front_tokens=None,
        **kwargs,
    ):
        self.helper_encoder = dict(helper_encoder or {})
        self.encoder_kwargs = dict(encoder_kwargs or {})
        self.pooling = pooling
        self.max_tokens = None if max_tokens is None else int(max_tokens)
        self.front_tokens = None if front_tokens is None else int(front_tokens)
        super().__init__(**kwargs)
        if self.helper_encoder.get("hidden_size"):
            self.hidden_size = int(self.helper_encoder["hidden_size"])

    def encoder_config(self):
        """The backbone's ``PretrainedConfig``."""
        d = dict(self.helper_encoder)
        return AutoConfig.for_model(d.pop("model_type"), **d)


class HelperForSequenceClassification(PreTrainedModel):
    """Encoder + pooling + ``head`` (Linear over K + 1 classes): the network of
    ``helpdp.models.encoder.HelperNet`` with the same parameter names, as a ``PreTrainedModel``."""

    config_class = HelperConfig
    base_model_prefix = "encoder"
    main_input_name = "input_ids"

    def __init__(self, config: HelperConfig):
        super().__init__(config)
        self.encoder = AutoModel.from_config(config.encoder_config(), **config.encoder_kwargs)
        self.pooling = config.pooling
        self.head = nn.Linear(int(config.helper_encoder["hidden_size"]), config.num_labels)
        self.post_init()

    def _init_weights(self, module):
        if module is self.head:
            nn.init.normal_(module.weight, std=0.02)
            nn.init.zeros_(module.bias)
        elif hasattr(self.encoder, "_init_weights") and module is not self:
            self.encoder._init_weights(module)

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        input_ids, attention_mask = self.cut(input_ids, attention_mask)
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = self.head(pool(h, attention_mask, self.pooling).float())
        loss = None
        if labels is not None:
            if labels.dim() == 1:  # class indices, as transformers' own classifiers take
                labels = nn.functional.one_hot(labels.long(), self.config.num_labels)
            loss = soft_cross_entropy(logits, labels, torch.ones(self.config.num_labels))
        return SequenceClassifierOutput(loss=loss, logits=logits)

    def cut(self, input_ids, attention_mask):
        """Rows with more than ``max_tokens`` real tokens cut to their first
        ``front_tokens`` and last ``max_tokens - front_tokens`` (the project's encoder's
        cut), the batch re-padded on the right; unchanged when no row is too long."""
        n, front = self.config.max_tokens, self.config.front_tokens
        if n is None or int(attention_mask.sum(1).max()) <= n:
            return input_ids, attention_mask
        front = min(int(front if front is not None else n // 2), n)
        rows = []
        for ids, mask in zip(input_ids, attention_mask):
            real = ids[mask.bool()]
            if len(real) > n:
                real = torch.cat([real[:front], real[len(real) - (n - front) :]])
            rows.append(real)
        width = max(len(r) for r in rows)
        pad = self.config.pad_token_id if self.config.pad_token_id is not None else 0
        ids = torch.full(
            (len(rows), width), int(pad), dtype=input_ids.dtype, device=input_ids.device
        )
        mask = torch.zeros((len(rows), width), dtype=attention_mask.dtype, device=input_ids.device)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        return ids, mask


def pool(h, attention_mask, pooling: str = "mean"):
    """``(batch, hidden)``: the last real token's state (``last``; padding on either side),
    else the masked mean."""
    if pooling == "last":
        pos = torch.arange(attention_mask.shape[1], device=attention_mask.device)
        last = (attention_mask.long() * (pos + 1)).argmax(1)
        return h[torch.arange(h.shape[0], device=h.device), last]
    m = attention_mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / m.sum(1).clamp_min(1.0)


def soft_cross_entropy(logits, target, class_weight):
    """``-sum_c w_c y_c log p_c`` summed over the batch, over ``sum_c w_c y_c``: the
    weighted mean, so a batch of rare-class targets is not down-scaled."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    wy = target.float() * class_weight
    return -(wy * logp).sum() / wy.sum().clamp_min(1e-12)


def from_helper_net(
    net, classes: list[str], max_tokens: int | None = None, front_tokens: int | None = None
) -> HelperForSequenceClassification:
    """A ``HelperForSequenceClassification`` with ``net``'s weights (a ``HelperNet``
    whose LoRA adapters, if any, are merged first) and the input window (the config's)."""
    enc = net.encoder
    if hasattr(enc, "merge_and_unload"):  # LoRA: plain weights
        enc = enc.merge_and_unload()
    enc_cfg = enc.config.to_dict()
    kwargs = {"add_pooling_layer": False} if getattr(enc, "pooler", "absent") is None else {}
    config = HelperConfig(
        helper_encoder=enc_cfg,
        encoder_kwargs=kwargs,
        pooling=net.pooling,
        max_tokens=max_tokens,
        front_tokens=front_tokens,
        pad_token_id=enc_cfg.get("pad_token_id"),
        id2label=dict(enumerate(classes)),
        label2id={c: i for i, c in enumerate(classes)},
        architectures=["HelperForSequenceClassification"],
    )
    model = HelperForSequenceClassification(config)
    model.encoder.load_state_dict(enc.state_dict())
    model.head.load_state_dict(net.head.state_dict())
    return model.to(next(net.parameters()).device).eval()


AutoConfig.register(MODEL_TYPE, HelperConfig, exist_ok=True)
AutoModelForSequenceClassification.register(
    HelperConfig, HelperForSequenceClassification, exist_ok=True
)
