"""The language-model PRM: a pretrained LM with a scalar head, fine-tuned with LoRA.

Architecture. Any model that ``AutoModelForSequenceClassification`` wraps,
``num_labels=1``: a causal LM (Qwen3: the head reads the hidden state of the last
non-padding token) or, with ``backbone=minilm``, the BERT encoder
all-MiniLM-L6-v2 (the head reads the pooled ``[CLS]`` token). It gives one logit,
trained with binary cross-entropy on the soft Monte-Carlo label (``prm.data``).
The backbone is adapted with LoRA (peft); the head (``score`` or ``classifier``)
is trainable through ``modules_to_save``.

The action is marked in the input, not by a second head: the model reads
``"<state text>\\n[action=<name>]"``. Why one head with an action suffix:
(1) it is the unmodified sequence-classification model, so any backbone works
and peft's SEQ_CLS saving/loading applies as is; (2) the suffix is the last thing
the model reads, so the pooled last token attends to the whole state *knowing*
which action is being evaluated, and both actions share every parameter, which
matters because help is observed far less often than nohelp; (3) it extends to
K interventions without changing the architecture. The price is one forward pass
per (state, action) when scoring, i.e. 2 per state for one intervention.

Long texts are cut so that the action suffix always survives truncation: the
first ``head_tokens`` tokens (the task statement; 0 for the Qwen configs) plus the
latest tokens (the most recent history). A tokenizer with ``[CLS]``/``[SEP]``
(BERT's WordPiece) gets them around the sequence, ``[CLS] head tail
[action=...] [SEP]``; the WordPiece tokenizer reads the marker as ``[ action =
expert ]``, five ordinary tokens. The pad token (and ``config.pad_token_id``,
which a causal head uses to find the last real token) is always set.

On GPU: bf16 autocast (the frozen backbone is loaded in bf16, LoRA weights and
head stay fp32) and gradient checkpointing. On CPU: fp32.

Training is ``transformers.Trainer`` (``helpdp.models.trainer.fit_with_trainer``,
shared with the helper classifier): AdamW, linear warm-up and decay, clipping,
``group_by_length`` batches; two additions of ours, the per-example weight in
the loss (``compute_loss``) and the best epoch by validation loss kept in memory
(a callback, no checkpoints on disk). Measured against the hand-written loop it
replaced, on the CPU tests' data (``toy_prm`` separable): the tiny Qwen3 (60
tasks, 5 epochs) test AUROC 1.000 both, Brier 0.0085 (Trainer) vs 0.0100, fit
0.6-0.9 s vs 0.5-0.6 s; MiniLM (24 tasks, 2 epochs) AUROC 1.000 both, Brier
0.0052 vs 0.0002, because transformers' warm-up starts at lr 0 (ours started at
1/warm-up steps), which costs a visible share of so short a run (with
warmup_ratio=0: 0.0012 vs 0.0006).

A PRM directory of this kind holds ``adapter/`` (LoRA weights + head),
``tokenizer/``, ``base/`` (only when the backbone was built from a config with
random weights, so it can be rebuilt exactly) and ``prm.json``. A ``minilm`` PRM
holds no copy of the 90 MB backbone: ``prm.json`` names the pinned package and the
sha256 of its ``model.safetensors``, and loading checks both
(``helpdp.models.minilm.minilm_dir``).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback

from collect.awm.observation import render_state_text
from helpdp.cliconf import to_dict
from helpdp.cliconf.progress import tqdm_bar
from helpdp.models.minilm import DIST, SAFETENSORS_SHA256, MiniLMUnavailable, minilm_dir
from helpdp.models.tokenizer import train_tokenizer
from helpdp.models.trainer import Optimisation, Reporting, fit_with_trainer
from prm.base import FIT_STAGES, PRM, read_meta
from prm.config import PRMModelConfig, prm_name, saved_lm_config
from prm.data import Examples, state_rows

log = logging.getLogger(__name__)

DEFAULT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
BERT_TARGETS = ["query", "key", "value", "dense"]  # attention, FFN and pooler projections
BACKBONES = ("minilm",)


def action_suffix(name: str) -> str:
    return f"\n[action={name}]"


def device_and_dtype(device: str, c) -> tuple[torch.device, torch.dtype]:
    """The device (:func:`resolve_device`) and the weights' dtype of a PRM config ``c``:
    bfloat16 on a CUDA device that supports it (or as ``c.bf16`` says), else float32."""
    dev = resolve_device(device, c.cpu_threads)
    bf16 = (
        (dev.type == "cuda" and torch.cuda.is_bf16_supported()) if c.bf16 is None else bool(c.bf16)
    )
    return dev, torch.bfloat16 if bf16 and dev.type == "cuda" else torch.float32


def resolve_device(device: str = "auto", cpu_threads: int | None = None) -> torch.device:
    """The torch device for ``device`` (auto: CUDA when available); on CPU, set the
    process's torch thread count to ``cpu_threads`` when given."""
    dev = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    )
    if dev.type == "cpu" and cpu_threads:
        torch.set_num_threads(int(cpu_threads))
    return dev


class LMPRM(PRM):
    kind = "lm"

    def __init__(self, meta: dict, model, tokenizer, device, base_state=None):
        super().__init__(meta)
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self._base_state = base_state  # state of a from-config backbone, to save it
        self._suffix_ids = [self._encode_plain(action_suffix(a)) for a in self.actions]
        # [CLS] ... [SEP] for an encoder's tokenizer (BERT); nothing for Qwen's or the tiny BPE
        cls_id, sep_id = (
            getattr(tokenizer, "cls_token_id", None),
            getattr(tokenizer, "sep_token_id", None),
        )
        both = cls_id is not None and sep_id is not None
        self._pre, self._post = ([cls_id], [sep_id]) if both else ([], [])

    # --- construction ---------------------------------------------------------
    @property
    def cfg(self) -> dict:
        """The config as saved in ``prm.json`` (a dict); :attr:`settings` reads it typed."""
        return self.meta["config"]

    @property
    def settings(self) -> PRMModelConfig:
        """:attr:`cfg` as a typed ``PRMModelConfig`` (``prm.config.saved_lm_config``)."""
        return saved_lm_config(self.meta["config"])

    @property
    def use_bf16(self) -> bool:
        want = self.settings.bf16
        ok = self.device.type == "cuda" and torch.cuda.is_bf16_supported()
        return ok if want is None else bool(want) and ok

    @classmethod
    def create(
        cls,
        cfg: dict | PRMModelConfig,
        *,
        actions,
        actor,
        texts,
        device: str = "auto",
        meta: dict | None = None,
    ) -> LMPRM:
        """A fresh PRM of ``cfg`` (a ``PRMModelConfig``, its node or its dict, saved as
        ``meta["config"]``): the backbone (``backbone=minilm``: the pinned
        all-MiniLM-L6-v2; else the hub/local checkpoint ``base_model``, or a Qwen3
        built from ``cfg`` with random weights and a tokenizer trained on ``texts``)
        wrapped with LoRA."""
        from peft import LoraConfig, TaskType, get_peft_model
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, Qwen3Config

        saved = to_dict(cfg)
        c = saved_lm_config(saved)
        torch.manual_seed(int(c.seed))
        dev, dtype = device_and_dtype(device, c)
        base_state = None
        backbone = c.backbone
        extra_meta = {}
        if backbone:
            tok, base, extra_meta = _pinned_backbone(backbone, dtype)
        elif c.base_model:
            kw = {"revision": c.revision or None, "trust_remote_code": bool(c.trust_remote_code)}
            tok = AutoTokenizer.from_pretrained(c.base_model, **kw)
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token
            base = AutoModelForSequenceClassification.from_pretrained(
                c.base_model, num_labels=1, **_dtype_kw(dtype), **kw
            )
        else:
            suffixes = [action_suffix(a) for a in actions]
            tok = train_tokenizer(texts, vocab_size=int(c.vocab_size), extra=suffixes * 8)
            config = Qwen3Config(
                vocab_size=len(tok),
                hidden_size=int(c.hidden_size),
                intermediate_size=int(c.intermediate_size),
                num_hidden_layers=int(c.num_layers),
                num_attention_heads=int(c.num_heads),
                num_key_value_heads=int(c.num_kv_heads),
                head_dim=int(c.hidden_size) // int(c.num_heads),
                max_position_embeddings=max(int(c.max_length), 64),
                num_labels=1,
                pad_token_id=tok.pad_token_id,
                tie_word_embeddings=False,
            )
            base = AutoModelForSequenceClassification.from_config(config)
            base_state = {k: v.detach().clone() for k, v in base.state_dict().items()}
        base.config.pad_token_id = tok.pad_token_id
        if dev.type == "cuda" and c.gradient_checkpointing in (None, True):
            base.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
            base.config.use_cache = False
        lora = LoraConfig(
            task_type=TaskType.SEQ_CLS,
            r=int(c.lora.r),
            lora_alpha=float(c.lora.alpha),
            lora_dropout=float(c.lora.dropout),
            target_modules=list(
                c.lora.target_modules or (BERT_TARGETS if backbone else DEFAULT_TARGETS)
            ),
            modules_to_save=[_head_name(base)],
        )
        with _quiet_peft():
            model = get_peft_model(base, lora)
        for p in model.parameters():  # trainable weights in fp32 (bf16 runs under autocast)
            if p.requires_grad and p.dtype != torch.float32:
                p.data = p.data.float()
        model.to(dev)
        meta = dict(meta or {})
        meta.update(
            {
                "actions": list(actions),
                "actor": actor,
                "base_model": extra_meta.get("package") or c.base_model or "qwen3-from-config",
            }
        )
        if extra_meta:
            meta["backbone"] = extra_meta
        meta["config"] = saved
        return cls(meta, model, tok, dev, base_state)

    # --- encoding ---------------------------------------------------------------
    def _encode_plain(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode(self, texts, actions) -> list[list[int]]:
        """Token ids of ``[CLS] text + action suffix [SEP]`` (the special tokens only
        for an encoder's tokenizer), the text cut to fit ``max_length``: its first
        ``head_tokens`` tokens (at most half the room) plus its latest ones."""
        max_len = int(self.settings.max_length)
        texts = [render_state_text(str(t)) for t in texts]  # no special token from the text
        enc = self.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
        out = []
        for ids, a in zip(enc, np.asarray(actions).tolist(), strict=True):
            suf = self._suffix_ids[a] + self._post
            room = max(max_len - len(self._pre) - len(suf), 0)
            ids = list(ids)
            if len(ids) > room:
                head = min(int(self.settings.head_tokens or 0), room // 2)
                tail = room - head
                ids = ids[:head] + (ids[len(ids) - tail :] if tail else [])
            out.append(self._pre + ids + suf)
        return out

    def _batch(self, seqs: list[list[int]]):
        pad = self.tokenizer.pad_token_id
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
            mask[i, : len(s)] = 1
        return ids.to(self.device), mask.to(self.device)

    def _forward(self, seqs):
        ids, mask = self._batch(seqs)
        with torch.autocast(
            device_type=self.device.type, dtype=torch.bfloat16, enabled=self.use_bf16
        ):
            out = self.model(input_ids=ids, attention_mask=mask)
        return out.logits.float().view(-1)

    # --- scoring ----------------------------------------------------------------
    def logits_of(
        self,
        seqs: list[list[int]],
        *,
        batch_size: int | None = None,
        progress: bool = False,
        desc: str = "scoring",
    ) -> np.ndarray:
        """Logits for encoded sequences, batched by length (sorted, so each batch pads
        to a similar width), returned in input order; ``progress``: a bar labelled
        ``desc``, counting examples, that goes when done."""
        batch_size = int(batch_size or self.settings.eval_batch_size)
        out = np.empty(len(seqs), np.float64)
        if not seqs:
            return out
        order = np.argsort([len(s) for s in seqs], kind="stable")
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                bar = tqdm_bar()(
                    total=len(order), desc=desc, unit="ex", disable=not progress, leave=False
                )
                for b in range(0, len(order), batch_size):
                    idx = order[b : b + batch_size]
                    out[idx] = self._forward([seqs[i] for i in idx]).cpu().numpy()
                    bar.update(len(idx))
                bar.close()
        finally:
            self.model.train(was_training)
        return out

    def _predict_logits(self, ds, state_ids, actions, progress: bool = False):
        texts = ds.states["text"].astype(str).to_numpy()[state_rows(ds, state_ids)]
        return self.logits_of(self.encode(texts, actions), progress=progress)

    # --- training ---------------------------------------------------------------
    def loss_of(self, examples: Examples, *, progress: bool = False, desc: str = "loss") -> float:
        """Weighted BCE of the soft labels (the training objective) on ``examples``
        (``progress``: a bar labelled ``desc`` while the examples are scored)."""
        if len(examples) == 0:
            return float("nan")
        f = examples.frame
        seqs = self.encode(f["text"], f["action"].to_numpy(np.int64))
        z = self.logits_of(seqs, progress=progress, desc=desc)
        y = f["label"].to_numpy(np.float64)
        w = f["weight"].to_numpy(np.float64)
        return float((w * (np.logaddexp(0.0, z) - y * z)).sum() / w.sum())

    def fit(
        self, train: Examples, val: Examples | None = None, *, progress: bool = True, stage=None
    ) -> dict:
        """Fine-tune on ``train`` with ``transformers.Trainer`` (``fit_with_trainer``,
        the loop the helper shares): the per-example weighted cross-entropy of the
        soft labels, batches of similar length. When ``val`` is given, keep the
        epoch with the lowest validation loss, if one is below the loss before
        training (else the last). Returns the loss history. ``stage(name)`` is called
        as each of ``FIT_STAGES`` begins; on CPU with a measured backbone the expected
        cost is printed first (``helpdp.cliconf.progress``)."""
        stage = stage or (lambda name: None)
        c = self.settings
        if len(train) == 0:
            raise ValueError("no training examples (is the train split empty?)")
        f = train.frame
        if max_n := c.max_train_examples:
            if len(f) > max_n:
                f = f.sample(n=int(max_n), random_state=int(c.seed)).reset_index(drop=True)
                train = Examples(f, train.label_source)
        seqs = self.encode(f["text"], f["action"].to_numpy(np.int64))
        y = f["label"].to_numpy(np.float32)
        w = f["weight"].to_numpy(np.float32)
        rows = [{"input_ids": s, "labels": y[i], "weight": w[i]} for i, s in enumerate(seqs)]

        def collate(batch):
            ids, mask = self._batch([r["input_ids"] for r in batch])
            return {
                "input_ids": ids,
                "attention_mask": mask,
                "labels": torch.tensor(np.array([r["labels"] for r in batch])),
                "weight": torch.tensor(np.array([r["weight"] for r in batch])),
            }

        def weighted_bce(model, inputs):
            yb, wb = inputs.pop("labels"), inputs.pop("weight")
            out = model(**inputs)
            z = out.logits.float().view(-1)
            per = torch.nn.functional.binary_cross_entropy_with_logits(z, yb, reduction="none")
            return (per * wb).sum() / wb.sum(), out

        has_val = val is not None and len(val) > 0
        self._announce(len(f), len(val) if has_val else 0, progress)
        stage(FIT_STAGES[0])
        history = {
            "train_loss_before": self.loss_of(train, progress=progress, desc="train loss"),
            "epochs": [],
        }
        if has_val:
            history["val_loss_before"] = self.loss_of(val, progress=progress, desc="val loss")
        best = _BestEpoch(self, val if has_val else None, history, progress)
        stage(FIT_STAGES[1])
        t0 = time.perf_counter()
        optim = Optimisation(
            epochs=int(c.epochs),
            batch_size=int(c.batch_size),
            lr=float(c.lr),
            weight_decay=float(c.weight_decay),
            warmup_ratio=float(c.warmup_ratio),
            seed=int(c.seed),
            max_grad_norm=float(c.max_grad_norm or 0.0),
        )
        trainer = fit_with_trainer(
            self.model,
            rows,
            collate,
            optim,
            cpu=self.device.type == "cpu",
            bf16=self.use_bf16,
            report=Reporting(progress=progress, print_logs=False, desc="prm fit"),
            group_by_length=True,
            loss=weighted_bce,
            callbacks=[best],
        )
        self.model.to(self.device)  # Trainer uses its own device choice (cuda:0 for cuda:N)
        history["train_seconds"] = time.perf_counter() - t0
        n_tokens = sum(len(s) for s in seqs) * int(c.epochs)
        history["train_tokens_per_s"] = n_tokens / max(history["train_seconds"], 1e-9)
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        for rec, loss in zip(history["epochs"], losses, strict=False):
            rec["train_loss_running"] = float(loss)
        if best.state is not None:
            self.model.load_state_dict(best.state, strict=False)
            history["best_val_loss"] = best.loss
        stage(FIT_STAGES[2])
        history["train_loss_after"] = self.loss_of(train, progress=progress, desc="train loss")
        if has_val:
            history["val_loss_after"] = self.loss_of(val, progress=progress, desc="val loss")
        self.model.eval()
        return history

    def _announce(self, n_train: int, n_val: int, progress: bool) -> None:
        """The expected cost of ``fit`` on stderr, where a rate for this backbone on
        this device was measured (CPU, ``backbone=minilm``)."""
        from helpdp.cliconf.progress import RATES, announce_cost

        c = self.settings
        key = f"prm.train.{prm_name(c, 'lm')}"
        if not progress or self.device.type != "cpu" or f"{key}.fit" not in RATES:
            return
        epochs = int(c.epochs)
        announce_cost(
            "prm.train",
            {
                f"{key}.fit": n_train * epochs,
                f"{key}.score": 2 * n_train + (2 + epochs) * n_val,
            },
            f"{n_train} examples x {epochs} epochs, {n_val} validation",
        )

    # --- persistence --------------------------------------------------------------
    def _save(self, out: Path) -> None:
        from helpdp.models.encoder import quiet_load

        with quiet_load():  # no "Writing model shards" bar: the command's own bar says it
            self.model.save_pretrained(out / "adapter")
            self.tokenizer.save_pretrained(out / "tokenizer")
            if self._base_state is not None:
                from transformers import AutoModelForSequenceClassification

                base_cfg = copy.deepcopy(self.model.get_base_model().config)
                base_cfg.use_cache = True
                base = AutoModelForSequenceClassification.from_config(base_cfg)
                base.load_state_dict(self._base_state)
                base.save_pretrained(out / "base")

    @classmethod
    def load(cls, path, *, device: str = "auto") -> LMPRM:
        from peft import PeftModel
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = Path(path)
        meta = read_meta(path)
        c = saved_lm_config(meta["config"])
        dev, dtype = device_and_dtype(device, c)
        tok = AutoTokenizer.from_pretrained(path / "tokenizer")
        base_state = None
        if c.backbone:
            recorded, pinned = meta.get("backbone") or {}, _pins(c.backbone)
            for key in ("package", "model_safetensors_sha256"):
                if recorded.get(key) != pinned[key]:
                    raise ValueError(
                        f"{path}: trained on backbone {key}={recorded.get(key)!r} but this "
                        f"installation pins {pinned[key]!r}; retrain the PRM"
                    )
            _, base, _ = _pinned_backbone(c.backbone, dtype)  # checks the file's sha256
        elif (path / "base").exists():
            base = AutoModelForSequenceClassification.from_pretrained(
                path / "base", **_dtype_kw(dtype)
            )
            base_state = {k: v.detach().clone() for k, v in base.state_dict().items()}
        else:
            kw = {"revision": c.revision or None, "trust_remote_code": bool(c.trust_remote_code)}
            base = AutoModelForSequenceClassification.from_pretrained(
                meta["base_model"], num_labels=1, **_dtype_kw(dtype), **kw
            )
        base.config.pad_token_id = tok.pad_token_id
        with _quiet_peft():
            model = PeftModel.from_pretrained(base, path / "adapter")
        for p in model.parameters():
            if p.dtype != dtype and p.is_floating_point():
                p.data = p.data.to(dtype)
        model.to(dev)
        model.eval()
        return cls(meta, model, tok, dev, base_state)


def _pins(name: str) -> dict:
    """The provenance recorded in ``prm.json`` for a pinned backbone (no file access)."""
    if name not in BACKBONES:
        raise ValueError(f"backbone must be one of {BACKBONES} or null, got {name!r}")

    return {"name": name, "package": DIST, "model_safetensors_sha256": SAFETENSORS_SHA256}


def _pinned_backbone(name: str, dtype):
    """(tokenizer, sequence-classification model with 1 label, provenance) of a
    backbone pinned in this repository, loaded from local files only."""
    info = _pins(name)
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from helpdp.models.encoder import quiet_load

    try:
        d = minilm_dir()  # unpacks once; checks model.safetensors against the pinned sha256
    except MiniLMUnavailable as e:
        raise ValueError(str(e)) from e
    tok = AutoTokenizer.from_pretrained(d, local_files_only=True)
    with quiet_load():  # the fresh classifier is "missing" from the checkpoint
        base = AutoModelForSequenceClassification.from_pretrained(
            d, num_labels=1, local_files_only=True, **_dtype_kw(dtype)
        )
    return tok, base, info


def _head_name(model) -> str:
    """The scalar head's module name: ``classifier`` (BERT) or ``score`` (causal LMs)."""
    return "classifier" if hasattr(model, "classifier") else "score"


def _dtype_kw(dtype) -> dict:
    """``from_pretrained``'s dtype argument: ``dtype`` since transformers 4.56,
    ``torch_dtype`` before."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


@contextlib.contextmanager
def _quiet_peft():
    """Hide transformers' deprecation notice that peft triggers while wrapping a model."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
        )
        yield


class _BestEpoch(TrainerCallback):
    """At each epoch's end: the validation loss (``LMPRM.loss_of``, the training
    objective) into ``history["epochs"]``, and an in-memory copy of the trainable
    weights (LoRA + head) when it is the lowest so far, below the loss before
    training. No checkpoints on disk (Trainer's own best-model tracking saves one
    per epoch)."""

    def __init__(self, prm: LMPRM, val: Examples | None, history: dict, progress: bool = False):
        self.prm, self.val, self.history, self.progress = prm, val, history, progress
        self.loss = history.get("val_loss_before", math.inf)
        self.state = None

    def on_epoch_end(self, args, state, control, **kwargs):
        rec = {"epoch": len(self.history["epochs"])}
        if self.val is not None:
            rec["val_loss"] = self.prm.loss_of(self.val, progress=self.progress, desc="val loss")
            if rec["val_loss"] < self.loss:
                self.loss = rec["val_loss"]
                self.state = {
                    n: p.detach().clone()
                    for n, p in self.prm.model.named_parameters()
                    if p.requires_grad
                }
        self.history["epochs"].append(rec)
        log.info("epoch %d: %s", rec["epoch"], rec)
