"""The one training loop of the text models (the helper and the LM PRM): ``transformers.Trainer``.

``fit_with_trainer`` runs AdamW with a linear schedule after a linear warm-up,
gradient clipping, bf16 autocast on GPU and progress bars, nothing written to
disk (no checkpoints: a caller that keeps a best epoch does it in memory with a
callback, see ``prm.lm``). The loss is the model's own (``HelperNet`` returns it)
unless ``loss(model, inputs) -> (loss, outputs)`` is given (the PRM's per-example
weighted cross-entropy). ``group_by_length`` batches examples of similar length
(``LengthGroupedSampler``: less padding). Imports torch and transformers only
when called.

Its settings come in two bundles: :class:`Optimisation` (what the fit computes: the
same values give the same weights) and :class:`Reporting` (what it shows and logs).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from transformers import Trainer, TrainerCallback


@dataclass(frozen=True)
class Optimisation:
    """AdamW with a linear schedule after a linear warm-up: warm-up lasts
    ``int(o.warmup_ratio * total)`` of the ``total = ceil(len(rows) / batch_size) * epochs``
    steps; ``max_grad_norm=0`` disables clipping."""

    epochs: float
    batch_size: int
    lr: float
    weight_decay: float
    warmup_ratio: float
    seed: int
    max_grad_norm: float = 1.0


@dataclass(frozen=True)
class Reporting:
    """What a fit shows: ``progress`` bars; logging every ``logging_steps`` steps (default:
    each epoch), kept in ``state.log_history``; with ``print_logs=False`` (what the
    commands pass) the latest loss shows in the progress bar instead of one printed dict
    per log; ``desc`` labels the bar (its total is the number of optimiser steps)."""

    progress: bool = True
    logging_steps: int | None = None
    print_logs: bool = True
    desc: str = "train"


#: ``loss(model, inputs) -> (loss, outputs)``: a fit's own loss instead of the model's
Loss = Callable[["torch.nn.Module", Mapping[str, object]], "tuple[torch.Tensor, object]"]


def fit_with_trainer(
    model: torch.nn.Module,
    rows: Sequence[Mapping[str, object]],
    collate: Callable[[list[Mapping[str, object]]], Mapping[str, object]],
    optim: Optimisation,
    *,
    cpu: bool,
    bf16: bool = False,
    report: Reporting = Reporting(),
    group_by_length: bool = False,
    loss: Loss | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> Trainer:
    """Train ``model`` on ``rows`` (a sequence of dicts, batched by ``collate``) as
    ``optim`` says, on the CPU when ``cpu`` (bf16 autocast with ``bf16``), showing what
    ``report`` says; returns the ``Trainer`` (its ``state.log_history`` holds the logged
    losses)."""
    import torch
    from transformers import PrinterCallback, ProgressCallback, Trainer, TrainingArguments

    o, desc, progress = optim, report.desc, report.progress

    class _BarProgress(ProgressCallback):
        """The Trainer's progress bar, labelled, with the logged loss as its postfix."""

        def on_train_begin(self, args, state, control, **kwargs):
            super().on_train_begin(args, state, control, **kwargs)
            if self.training_bar is not None:
                self.training_bar.set_description(f"{desc} (steps)", refresh=False)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.training_bar is not None and logs and "loss" in logs:
                self.training_bar.set_postfix(loss=f"{float(logs['loss']):.4g}", refresh=False)

    class _Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(rows)

        def __getitem__(self, i):
            return rows[i]

    class _Trainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if loss is None:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            value, outputs = loss(model, inputs)
            return (value, outputs) if return_outputs else value

    total = math.ceil(len(rows) / o.batch_size) * float(o.epochs)
    with tempfile.TemporaryDirectory(prefix="helpdp-trainer-") as scratch:
        args = TrainingArguments(
            output_dir=scratch,
            num_train_epochs=float(o.epochs),
            per_device_train_batch_size=int(o.batch_size),
            learning_rate=float(o.lr),
            weight_decay=float(o.weight_decay),
            warmup_steps=int(float(o.warmup_ratio) * total),
            lr_scheduler_type="linear",
            max_grad_norm=float(o.max_grad_norm or 0.0),
            train_sampling_strategy="group_by_length" if group_by_length else "random",
            logging_strategy="steps" if report.logging_steps else "epoch",
            logging_steps=int(report.logging_steps or 1),
            save_strategy="no",
            report_to="none",
            disable_tqdm=not progress,
            remove_unused_columns=False,
            use_cpu=bool(cpu),
            bf16=bool(bf16),
            seed=int(o.seed),
            dataloader_pin_memory=False,
        )
        trainer = _Trainer(
            model=model,
            args=args,
            train_dataset=_Rows(),
            data_collator=collate,
            callbacks=list(callbacks),
        )
        if not report.print_logs:
            trainer.remove_callback(PrinterCallback)
            if progress and trainer.pop_callback(ProgressCallback) is not None:
                trainer.add_callback(_BarProgress)
        trainer.train()
    return trainer
