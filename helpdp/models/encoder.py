"""The helper's network: a text encoder, pooled, and a linear layer over K + 1 actions.

One architecture for every backbone: ``transformers.AutoModel`` (BERT for
``tiny`` and ``minilm``, Qwen3 for the GPU configs), masked mean pooling (what
all-MiniLM-L6-v2 was trained with) or the last real token (decoders), dropout,
``Linear(hidden, K + 1)``. The loss is the class-weighted cross-entropy against
soft targets (the label mixture's action distribution, ``helpdp.label``).

Inputs are the state text, tokenized without truncation and then cut to
``max_length``: the first ``head_tokens`` tokens (the task statement) plus the
end of the text (the latest turns, where the need for help shows), with the
tokenizer's [CLS]/[SEP] when it has them.

A saved helper directory is a transformers checkpoint (:mod:`helpdp.models.hf_helper`:
``config.json``, ``model.safetensors``, the tokenizer; LoRA adapters merged first) with
``helper.json`` and ``README.md`` beside it; format 1 (``encoder/``, ``tokenizer/``,
``head.safetensors``, ``helper.json``) still loads.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download a checkpoint

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from collect.awm.observation import render_state_text  # noqa: E402
from helpdp.models.hf_helper import pool, soft_cross_entropy  # noqa: E402,F401
from helpdp.models.lora import lora_settings  # noqa: E402

QWEN_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class HelperNet(nn.Module):
    """Encoder + pooling + linear head; ``forward`` returns ``{"loss", "logits"}``."""

    def __init__(self, encoder, n_classes: int, *, pooling="mean", dropout=0.1, class_weight=None):
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling
        hidden = encoder.config.hidden_size
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, n_classes)
        cw = torch.ones(n_classes) if class_weight is None else torch.as_tensor(class_weight)
        self.register_buffer("class_weight", cw.float(), persistent=False)

    def forward(self, input_ids, attention_mask, labels=None):
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        pooled = pool(out.last_hidden_state, attention_mask, self.pooling)
        logits = self.head(self.dropout(pooled.float()))
        res = {"logits": logits}
        if labels is not None:
            res["loss"] = soft_cross_entropy(logits, labels, self.class_weight)
        return res


def class_weights(targets: np.ndarray, scheme: str = "balanced") -> np.ndarray:
    """Loss weight per class: ``balanced`` is total mass / (C * class mass), for
    classes present in the targets (absent ones get 1); ``none`` is all ones."""
    c = targets.shape[1]
    if scheme == "none":
        return np.ones(c)
    if scheme != "balanced":
        raise ValueError(f"class_weighting must be balanced or none, got {scheme!r}")
    mass = targets.sum(0)
    present = mass > 0
    w = np.ones(c)
    w[present] = mass[present].sum() / (present.sum() * mass[present])
    return w


@contextmanager
def quiet_load(verbose: bool = False):
    """transformers' load report ("pooler.dense.bias MISSING ... Consider training on your
    downstream task") and weight-loading bar switched off inside the block, unless
    ``verbose`` or ``HELPDP_VERBOSE_LOAD=1``: the project loads encoders without the heads
    it replaces, and says what it loaded itself."""
    from transformers.utils import logging as hf_logging

    if verbose or os.environ.get("HELPDP_VERBOSE_LOAD") == "1":
        yield
        return
    level, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bar:
            hf_logging.enable_progress_bar()


def build_backbone(cfg: dict, texts) -> tuple:
    """``(encoder, tokenizer, source)`` for ``cfg["backbone"]`` (see the config)."""
    from transformers import AutoModel, AutoTokenizer

    kind = cfg["backbone"]
    if kind == "tiny":
        from transformers import BertConfig, BertModel

        from helpdp.models.tokenizer import train_tokenizer

        tok = train_tokenizer(texts, vocab_size=int(cfg["vocab_size"]))
        config = BertConfig(
            vocab_size=len(tok),
            hidden_size=int(cfg["hidden_size"]),
            num_hidden_layers=int(cfg["num_layers"]),
            num_attention_heads=int(cfg["num_heads"]),
            intermediate_size=int(cfg["intermediate_size"]),
            max_position_embeddings=max(int(cfg["max_length"]), 64),
            pad_token_id=tok.pad_token_id,
        )
        return BertModel(config, add_pooling_layer=False), tok, "bert-from-config"
    if kind == "minilm":
        from helpdp.models.minilm import minilm_dir

        d = minilm_dir(cfg.get("minilm_cache"))
        tok = AutoTokenizer.from_pretrained(d, local_files_only=True)
        with quiet_load():
            enc = AutoModel.from_pretrained(d, local_files_only=True, add_pooling_layer=False)
        return enc, tok, "all-MiniLM-L6-v2"
    if kind == "hf":
        if not cfg.get("base_model"):
            raise ValueError("backbone=hf needs base_model (a local checkpoint)")
        tok = AutoTokenizer.from_pretrained(cfg["base_model"], local_files_only=True)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        dtype = torch.bfloat16 if cfg.get("bf16") else torch.float32
        with quiet_load():
            enc = AutoModel.from_pretrained(cfg["base_model"], local_files_only=True, dtype=dtype)
        return enc, tok, cfg["base_model"]
    raise ValueError(f"backbone must be tiny, minilm or hf, got {kind!r}")


def add_lora(encoder, cfg: dict):
    """Wrap ``encoder`` with LoRA adapters (peft) when ``lora.r > 0``."""

    settings = lora_settings(cfg)
    if int(settings["r"] or 0) <= 0:
        return encoder
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=int(settings["r"]),
        lora_alpha=float(settings["alpha"]),
        lora_dropout=float(settings["dropout"]),
        target_modules=list(settings["target_modules"] or QWEN_TARGETS),
    )
    return get_peft_model(encoder, lora)


#: the Encoder keys (name, tokenizer directory, max_length, head_tokens) whose cut was said
_TOLD: set[tuple] = set()


class Encoder:
    """Text -> token ids with the head + tail cut (module docstring)."""

    def __init__(self, tokenizer, max_length: int, head_tokens: int, name: str = "helper"):
        self.tok = tokenizer
        self.name = name  # who says, once, that texts were cut
        self.told = False
        # a tokenizer loaded from a directory (a saved helper): said once per process, not
        # once per Encoder (helpdp.evaluate loads the helper once per budget)
        where = getattr(tokenizer, "name_or_path", "")
        self.key = (name, str(where), int(max_length), int(head_tokens)) if where else None
        self.pre = [tokenizer.cls_token_id] if tokenizer.cls_token_id is not None else []
        self.post = [tokenizer.sep_token_id] if tokenizer.sep_token_id is not None else []
        self.room = max(int(max_length) - len(self.pre) - len(self.post), 1)
        self.head = min(int(head_tokens), self.room // 2)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def __call__(self, texts) -> list[list[int]]:
        # a state text's own block markers stay; no other special token from the text
        texts = [render_state_text(t) or " " for t in map(str, texts)]
        # verbose=False: no "Token indices sequence length is longer than ..." (we cut)
        enc = self.tok(texts, add_special_tokens=False, verbose=False)["input_ids"]
        out, cut = [], 0
        for ids in enc:
            ids = list(ids)
            if len(ids) > self.room:
                cut += 1
                tail = self.room - self.head
                ids = ids[: self.head] + ids[len(ids) - tail :]
            out.append(self.pre + ids + self.post)
        if cut and not self.told and self.key not in _TOLD:
            self.told = True
            if self.key is not None:
                _TOLD.add(self.key)
            from helpdp.cliconf.progress import tqdm_bar

            tqdm_bar().write(  # above any bar that is showing, on a line of its own
                f"{self.name}: {cut} of {len(enc)} texts are longer than {self.room} tokens: "
                f"each is cut to its first {self.head} and last {self.room - self.head} tokens "
                "(max_length, head_tokens)",
                file=sys.stderr,
            )
        return out

    def collate(self, seqs: list[list[int]]) -> dict:
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
            mask[i, : len(s)] = 1
        return {"input_ids": ids, "attention_mask": mask}


def predict_proba(
    net, encoder: Encoder, seqs, *, batch_size=64, device="cpu", progress=False, desc="helper"
):
    """Class probabilities (n, K + 1) for encoded sequences, batched by length,
    under ``torch.no_grad`` in eval mode, returned in input order (``progress``: a bar
    labelled ``desc``)."""
    from helpdp.cliconf.progress import tqdm_bar

    tqdm = tqdm_bar()
    out = np.zeros((len(seqs), net.head.out_features))
    if not len(seqs):
        return out
    order = np.argsort([len(s) for s in seqs], kind="stable")
    was = net.training
    net.eval()
    try:
        with torch.no_grad():
            for b in tqdm(
                range(0, len(order), batch_size),
                desc=desc,
                unit="batch",
                disable=not progress,
                leave=False,
            ):
                idx = order[b : b + batch_size]
                batch = encoder.collate([seqs[i] for i in idx])
                batch = {k: v.to(device) for k, v in batch.items()}
                logits = net(**batch)["logits"]
                out[idx] = torch.softmax(logits.float(), -1).cpu().numpy()
    finally:
        net.train(was)
    return out


def save_net(net, tokenizer, out: Path, classes: list[str], encoder=None) -> list[Path]:
    """Write ``net`` into ``out`` as a transformers checkpoint (``config.json``,
    ``model.safetensors``: :mod:`helpdp.models.hf_helper`; LoRA adapters merged) and its
    tokenizer beside it; returns the files written. ``encoder`` (the :class:`Encoder` it
    was trained through): its window goes into the config (the model cuts a longer input
    as the encoder does) and the tokenizer's ``model_max_length``."""
    from helpdp.models.hf_helper import (
        HelperConfig,
        HelperForSequenceClassification,
        from_helper_net,
    )

    before = {p: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()}
    window = {}
    if encoder is not None:
        n_pre, n_post = len(encoder.pre), len(encoder.post)
        window = {"max_tokens": encoder.room + n_pre + n_post, "front_tokens": n_pre + encoder.head}
    model = from_helper_net(net, classes, **window)
    # a class loaded once as remote code (trust_remote_code) would copy its module here
    HelperConfig._auto_class = HelperForSequenceClassification._auto_class = None
    with quiet_load():
        model.save_pretrained(out)
    limit = tokenizer.model_max_length
    if window:
        tokenizer.model_max_length = window["max_tokens"]
    try:
        tokenizer.save_pretrained(out)
    finally:
        tokenizer.model_max_length = limit
    return sorted(p for p in out.iterdir() if p.is_file() and before.get(p) != p.stat().st_mtime_ns)


def is_legacy(path: Path) -> bool:
    """A helper directory of format 1 (``encoder/``, ``tokenizer/``, ``head.safetensors``)."""
    return (path / "head.safetensors").is_file() and not (path / "config.json").is_file()


def load_net(path: Path, meta: dict, device="cpu"):
    """``(net, tokenizer)`` of a saved helper directory: a transformers checkpoint
    (``HelperForSequenceClassification``), or format 1 (``encoder/`` + ``tokenizer/`` +
    ``head.safetensors``, a ``HelperNet``)."""
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer

    path = Path(path)
    if not is_legacy(path):
        from helpdp.models.hf_helper import HelperForSequenceClassification

        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        with quiet_load():
            net = HelperForSequenceClassification.from_pretrained(path, local_files_only=True)
        return net.to(device).eval(), tok
    cfg = meta["config"]
    tok = AutoTokenizer.from_pretrained(path / "tokenizer", local_files_only=True)
    with quiet_load():
        enc = AutoModel.from_pretrained(path / "encoder", local_files_only=True)
    net = HelperNet(enc, len(meta["classes"]), pooling=cfg.get("pooling", "mean"), dropout=0.0)
    net.head.load_state_dict(load_file(path / "head.safetensors"))
    net.to(device)
    net.eval()
    return net, tok
