"""``python -m helpdp.train``: build the pieces from a :class:`~helpdp.train.config.TrainConfig`
and run TRL's GRPOTrainer with :class:`~helpdp.train.rollout.AWMRollout` as ``rollout_func``.

Per step the metrics of the rollout (completion and format-error rates, expert
calls blind/recovery, the phase, the gate's decisions, time shares) reach TRL's
log next to its loss and rewards; :class:`MetricsCallback` writes every log to
``out/metrics.csv`` and a progress bar, TRL's TensorBoard callback to ``out/tb``.

Under ``accelerate launch --num_processes N`` every rank builds its own environment
pool and rollout (its own episodes, seeded by rank); rank 0 alone writes
``metrics.csv``, ``tb/`` and the model; each rank writes its decisions and episodes
to ``out/rank<R>/`` (``out/`` itself when alone). Checkpoints (``grpo.save_steps``) go
to ``out/checkpoints/checkpoint-N`` with each rank's rollout state;
``resume=last|PATH`` continues from one.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from collect.awm.rewards import build_rewards
from collect.interventions import build_interventions
from collect.schedule import SplitConfig, split_tasks, stable_int64, task_id
from collect.scratch import make_scratch_dir, sweep_scratch
from helpdp.jsonvalue import JSON
from helpdp.models.lora import LoRAConfig
from helpdp.train.config import GRPOSettings, ModelConfig, TrainConfig
from helpdp.train.envs import build_pool
from helpdp.train.gate import SplitSchedule, build_policy
from helpdp.train.ranks import (
    GlobalSplitSchedule,
    RolloutStateCallback,
    dist_rank,
    restore_rollout_state,
    state_file,
)
from helpdp.train.rollout import (
    AWMRollout,
    GateRules,
    HFBackend,
    RolloutSettings,
    TokenActor,
    VLLMBackend,
    task_prompts,
)
from helpdp.train.tiny import build_tiny, warm_start, world_texts

if TYPE_CHECKING:
    from collections.abc import Callable

    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
    from trl import GRPOTrainer

    from collect.awm.env import EnvPool
    from helpdp.train.envs import RemotePool

__all__ = [
    "MetricsCallback",
    "build_trainer",
    "find_checkpoint",
    "log_dir",
    "scratch_dir",
    "train",
    "training_tasks",
]

CONSOLE = {
    "loss": "loss",
    "reward": "reward",
    "rollout/completion_rate": "done",
    "rollout/format_error_rate": "fmt_err",
    "expert/calls": "expert",
    "phase/expert_rollouts": "n_exp",
}


def training_tasks(cfg: TrainConfig, pool: EnvPool | RemotePool) -> list[tuple[str, int]]:
    """(scenario, task_idx) of the configured splits, with a verifier (and a
    reference solution when the expert is the oracle)."""

    data = pool.dataset
    names = [n for n in data.names() if not cfg.tasks.scenarios or n in set(cfg.tasks.scenarios)]
    need_solution = any(iv.kind == "oracle" for iv in cfg.interventions.values())
    tasks = []
    for name in names:
        sc = data.get(name)
        idx = list(range(sc.n_tasks))
        if cfg.tasks.max_tasks is not None:
            idx = idx[: int(cfg.tasks.max_tasks)]
        for i in idx:
            if i not in sc.verifiers and i not in sc.sql_verifiers:
                continue
            if need_solution and i not in sc.solutions:
                continue
            tasks.append((name, i))
    # the split ranks every task of the worlds, so a task is in the split the collection
    # and the evaluation put it in, whatever is selected here
    splits = split_tasks(data.task_pool(), SplitConfig())
    wanted = set(cfg.tasks.splits)
    return [(n, i) for n, i in tasks if splits[task_id(n, i)] in wanted]


class MetricsCallback:
    """A ``transformers`` callback: every log row to CSV, a progress bar on stderr,
    phase transitions printed."""

    def __init__(self, out: Path, total: int, split: SplitSchedule, progress: bool = True):
        from helpdp.cliconf.progress import tqdm_bar

        tqdm = tqdm_bar()
        self.path = Path(out) / "metrics.csv"
        self.rows: list[dict] = []  # a resumed run: the rows up to its checkpoint (train())
        self.split = split
        self.seen = 0
        self.bar = tqdm(total=total, desc="grpo", unit="step", disable=not progress)

    # transformers.TrainerCallback protocol (duck-typed: every hook returns None)
    def __getattr__(self, name):
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)

    def on_log(self, args, state, control, logs=None, **kw):
        if not logs or "train_runtime" in logs or not state.is_world_process_zero:
            return
        row = {"step": state.global_step, **{k: v for k, v in logs.items()}}
        self.rows.append(row)
        keys: list[str] = []
        for r in self.rows:
            keys += [k for k in r if k not in keys]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(self.rows)
        post = {v: logs[k] for k, v in CONSOLE.items() if logs.get(k) is not None}
        post["phase"] = self.split.phase
        self.bar.set_postfix(
            {k: f"{v:.3g}" if isinstance(v, float) else v for k, v in post.items()}
        )
        for step, a, b, rate in self.split.transitions[self.seen :]:
            self.bar.write(
                f"phase: {a} -> {b} after rollout batch {step} (format errors {rate:.2f})"
            )
        self.seen = len(self.split.transitions)

    def on_step_end(self, args, state, control, **kw):
        self.bar.update(state.global_step - self.bar.n)

    def on_train_end(self, args, state, control, **kw):
        self.bar.close()


def _device(grpo: GRPOSettings) -> str:
    import torch

    if grpo.device != "auto":
        return grpo.device
    return "cuda" if torch.cuda.is_available() else "cpu"


def log_dir(out: str | Path) -> Path:
    """Where this rank writes decisions.jsonl, episodes.jsonl and train.json: ``out``
    when alone, ``out/rank<R>`` under a multi-process launch."""
    rank, world = dist_rank()
    return Path(out) if world == 1 else Path(out) / f"rank{rank}"


def _prepare_out(cfg: TrainConfig) -> Path:
    """``cfg.out``, created, without the logs of an earlier run (rank 0: metrics.csv;
    every rank: its own decisions and episodes); a resumed run keeps them (train())."""
    out = Path(cfg.out)
    log_dir(out).mkdir(parents=True, exist_ok=True)
    if cfg.resume:
        return out
    for name in ("decisions.jsonl", "episodes.jsonl"):
        (log_dir(out) / name).unlink(missing_ok=True)
    if dist_rank()[0] == 0:
        (out / "metrics.csv").unlink(missing_ok=True)
    return out


def _training_data(
    cfg: TrainConfig, pool: EnvPool | RemotePool
) -> tuple[list[tuple[str, int]], Dataset, dict]:
    """``(tasks, dataset, lookup)``: the training tasks, their prompts as a
    ``datasets.Dataset`` and the prompt -> task lookup of the rollout."""
    from datasets import Dataset

    if not hasattr(pool, "dataset"):
        raise ValueError("the pool has no dataset")
    tasks = training_tasks(cfg, pool)
    if not tasks:
        raise ValueError("no training task: check tasks.scenarios / tasks.splits / worlds")
    rows, lookup = task_prompts(pool, tasks)
    return tasks, Dataset.from_list(rows), lookup


def _load_model(
    cfg: TrainConfig, pool: EnvPool | RemotePool, tasks: list[tuple[str, int]]
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` of ``cfg.model``: a tiny Qwen3 trained on the worlds'
    texts (and warm-started), or a checkpoint; the tokenizer always pads."""
    import torch

    if cfg.model.kind == "tiny":
        corpus, turns = world_texts(pool, tasks)
        model, tok = build_tiny(cfg.model, corpus)
        warm_start(model, tok, turns, cfg.model.warm_start_steps)
    elif cfg.model.kind == "hf":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        source, extra = cfg.model.name_or_path, {}
        if cfg.model.gguf:
            source, extra = _gguf_weights(cfg.model)
        tok = AutoTokenizer.from_pretrained(
            source, local_files_only=cfg.model.local_files_only, **extra
        )
        extra = dict(extra)
        dtype = "auto" if cfg.model.dtype == "auto" else getattr(torch, cfg.model.dtype)
        if cfg.model.gguf and dtype == "auto":
            dtype = torch.float32  # transformers dequantises GGUF weights
        if cfg.model.gguf:  # trained: every weight unpacked into a plain dense model
            from transformers import GgufConfig

            extra["quantization_config"] = GgufConfig(extra["gguf_file"], dequantize=True)
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=dtype, local_files_only=cfg.model.local_files_only, **extra
        )
        if getattr(model, "hf_quantizer", None) is not None:
            # dequantised: the GGUF quantizer is only a marker now, and the Trainer
            # refuses a model it marks (GGUF "does not support training")
            model.hf_quantizer.remove_quantization_config(model)
    else:
        raise ValueError(f"model.kind must be tiny or hf, got {cfg.model.kind!r}")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model, tok


def _gguf_weights(model_cfg: ModelConfig) -> tuple[str, dict[str, str]]:
    """The directory and ``gguf_file=`` of the real model ``model_cfg.gguf`` (installed
    by ``make real-actor``; size, GGUF metadata and sha256 checked against the pins)."""
    from collect.realmodel import MODELS, ensure_model

    if model_cfg.gguf not in MODELS:
        raise ValueError(
            f"model.gguf: unknown model {model_cfg.gguf!r}; known: {', '.join(MODELS)}"
        )
    if model_cfg.name_or_path:
        raise ValueError("model.name_or_path must be empty with model.gguf (the gguf names it)")
    path = ensure_model(model_cfg.gguf, None, check_hash=True)
    return str(path.parent), {"gguf_file": path.name}


def _grpo_args(cfg: TrainConfig, out: Path):
    """``trl.GRPOConfig`` of ``cfg.grpo`` (its reward weights set later)."""
    from trl import GRPOConfig

    g = cfg.grpo
    return GRPOConfig(
        output_dir=str(out / "checkpoints"),
        max_steps=g.max_steps,
        learning_rate=g.learning_rate,
        per_device_train_batch_size=g.prompts_per_step * g.num_generations,
        num_generations=g.num_generations,
        gradient_accumulation_steps=g.gradient_accumulation_steps,
        max_completion_length=g.max_completion_length,
        temperature=g.temperature,
        top_p=g.top_p,
        beta=g.beta,
        loss_type=g.loss_type,
        bf16=g.bf16,
        gradient_checkpointing=g.gradient_checkpointing,
        use_vllm=g.use_vllm,
        vllm_mode=g.vllm_mode,
        vllm_gpu_memory_utilization=g.vllm_gpu_memory_utilization,
        generation_kwargs={"stop": ["</tool_call>"], "include_stop_str_in_output": True}
        if g.use_vllm and cfg.rollout.stop_after_tool_call
        else None,
        logging_steps=g.logging_steps,
        save_strategy="steps" if g.save_steps else "no",
        save_steps=g.save_steps or 500,
        seed=g.seed,
        report_to="none",
        disable_tqdm=True,
        use_cpu=_device(g) == "cpu",
        reward_weights=None,
        dataloader_num_workers=0,
    )


def _actor_factory(
    cfg: TrainConfig, tok: PreTrainedTokenizerBase
) -> Callable[[GRPOTrainer], TokenActor]:
    """``trainer -> TokenActor``: the actor that generates with the trainer's model
    (through vLLM or ``generate``)."""
    g = cfg.grpo

    def actor_factory(trainer):
        if g.use_vllm:
            backend: VLLMBackend | HFBackend = VLLMBackend(trainer)
        else:
            backend = HFBackend(
                lambda: trainer.accelerator.unwrap_model(trainer.model),
                tok,
                temperature=g.temperature,
                top_p=g.top_p,
                stop_after_call=cfg.rollout.stop_after_tool_call,
            )
        return TokenActor(
            backend,
            tok,
            max_turn_tokens=cfg.rollout.max_turn_tokens,
            max_completion=g.max_completion_length,
            chat_template_kwargs=cfg.model.chat_template_kwargs,
            stop_after_call=cfg.rollout.stop_after_tool_call,
        )

    return actor_factory


def _peft_config(lora: LoRAConfig):
    """``peft.LoraConfig`` of ``model.lora``; None when ``lora.r`` is 0."""
    from peft import LoraConfig

    if not lora.r:
        return None
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        task_type="CAUSAL_LM",
    )


def _callbacks(
    cfg: TrainConfig, out: Path, split: SplitSchedule
) -> list[MetricsCallback | TrainerCallback]:
    """metrics.csv and the progress bar; TensorBoard when ``grpo.report_to`` names it."""
    g = cfg.grpo
    rank = dist_rank()[0]
    callbacks: list[MetricsCallback | TrainerCallback] = [
        MetricsCallback(out, g.max_steps, split, cfg.progress and rank == 0)
    ]
    if "tensorboard" in g.report_to and rank == 0:  # one event file, rank 0's
        from torch.utils.tensorboard import SummaryWriter
        from transformers.integrations import TensorBoardCallback

        callbacks.append(TensorBoardCallback(tb_writer=SummaryWriter(str(out / "tb"))))
    return callbacks


def build_trainer(
    cfg: TrainConfig, *, work_root: str | None = None, interventions=None, policy=None
):
    """``(trainer, rollout, pool)`` for ``cfg`` (:func:`~helpdp.train.config.train_config`
    builds one from overrides); ``interventions``/``policy`` override the configured expert
    and gate (tests)."""
    import torch
    from trl import GRPOTrainer

    if cfg.gate.design not in ("agent", "proactive"):
        raise ValueError(f"gate.design must be agent or proactive, got {cfg.gate.design!r}")
    if cfg.grpo.cpu_threads:
        torch.set_num_threads(int(cfg.grpo.cpu_threads))
    out = Path(cfg.out)  # prepared below, once rank 0 has claimed it (the command's guard)
    pool = build_pool(cfg, work_root)
    tasks, dataset, lookup = _training_data(cfg, pool)
    model, tok = _load_model(cfg, pool, tasks)

    args = _grpo_args(cfg, out)
    funcs, weights = build_rewards(cfg.rewards)
    args.reward_weights = weights
    split = GlobalSplitSchedule.from_config(cfg.split)
    rank, _ = dist_rank()
    # each rank's own episode seeds (rank 0 keeps grpo.seed: one process is unchanged)
    seed = cfg.grpo.seed
    if rank:
        seed = stable_int64("helpdp.train.rank", cfg.grpo.seed, rank) & 0x7FFFFFFF
    if interventions is None:
        interventions = build_interventions(dict(cfg.interventions))
    interventions = list(interventions)[:1]
    if policy is None:  # the random gates draw per (seed, episode id): their own per rank
        gate_seed = cfg.gate.seed
        if rank:
            gate_seed = stable_int64("helpdp.train.gate", cfg.gate.seed, rank) & 0x7FFFFFFF
        policy = build_policy(dataclasses.replace(cfg.gate, seed=gate_seed))
    rollout = AWMRollout(
        pool,
        interventions,
        lookup,
        _actor_factory(cfg, tok),
        policy,
        split,
        rules=GateRules(
            design=cfg.gate.design,
            max_per_episode=cfg.gate.max_per_episode,
            max_per_batch=cfg.gate.max_per_batch,
            denied_text=cfg.gate.denied_text,
        ),
        settings=RolloutSettings(
            max_completion=cfg.grpo.max_completion_length,
            threads=cfg.rollout.threads,
            seed=seed,
            num_generations=cfg.grpo.num_generations,
            out=log_dir(out),
        ),
    )
    peft_config = _peft_config(cfg.model.lora)
    callbacks = _callbacks(cfg, out, split) + [RolloutStateCallback(rollout, rank)]
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if cfg.grpo.use_vllm and _device(cfg.grpo) == "cpu":
        from helpdp.train.vllm_cpu import patch_vllm_cpu

        print("vllm on CPU, patched:", ", ".join(patch_vllm_cpu()) or "nothing", flush=True)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=peft_config,
        rollout_func=rollout,
        callbacks=callbacks,
    )
    trainer.accelerator.wait_for_everyone()  # rank 0 claimed out= before getting here
    _prepare_out(cfg)
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # the progress bar and metrics.csv report instead
    return trainer, rollout, pool


def find_checkpoint(cfg: TrainConfig) -> Path | None:
    """The checkpoint ``cfg.resume`` names: None when empty; ``last``: the newest
    ``out/checkpoints/checkpoint-N``; else a directory. A missing one is an error."""
    if not cfg.resume:
        return None
    if cfg.resume == "last":
        root = Path(cfg.out) / "checkpoints"
        found = sorted(
            (p for p in root.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
            key=lambda p: int(p.name.split("-")[-1]),
        )
        if not found:
            raise ValueError(f"resume=last: no checkpoint-N in {root}")
        return found[-1]
    path = Path(cfg.resume)
    if not (path / "trainer_state.json").is_file():
        raise ValueError(f"resume: {path} is not a checkpoint (no trainer_state.json)")
    return path


def _resume_logs(
    cfg: TrainConfig, checkpoint: Path, rollout: AWMRollout, callbacks: list[object]
) -> None:
    """A resumed run: the rollout's state of the checkpoint, this rank's decisions and
    episodes of the batches before it, rank 0's metrics rows up to its step."""
    rank = dist_rank()[0]
    path = state_file(checkpoint, rank)
    if not path.is_file():
        raise ValueError(f"resume: {path} is missing (a checkpoint of this many ranks?)")
    restore_rollout_state(rollout, json.loads(path.read_text()))
    for name in ("decisions.jsonl", "episodes.jsonl"):
        f = log_dir(cfg.out) / name
        if f.is_file():
            keep = [
                ln for ln in f.read_text().splitlines() if json.loads(ln)["step"] < rollout.step
            ]
            f.write_text("".join(ln + "\n" for ln in keep))
    step = json.loads((checkpoint / "trainer_state.json").read_text())["global_step"]
    metrics = Path(cfg.out) / "metrics.csv"
    if rank == 0 and metrics.is_file():
        with open(metrics, newline="") as f:
            rows = [r for r in csv.DictReader(f) if int(r["step"]) <= step]
        for cb in callbacks:
            if isinstance(cb, MetricsCallback):
                cb.rows = [{k: _number(v) for k, v in r.items() if v != ""} for r in rows]


def _number(text: str) -> int | float | str:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


#: a rank's scratch directory (its environments' databases) in the system's temporary
#: directory: ``helpdp-train-<pid>-<random>`` (:func:`collect.scratch.make_scratch_dir`)
TRAIN_SCRATCH_PREFIX = "helpdp-train-"


def scratch_dir() -> Path:
    """A fresh scratch directory of this rank, removed by :func:`train` at its end; the
    ones of ranks killed before theirs (SIGKILL runs no cleanup) are removed here first:
    only directories named by this code whose process is dead (another rank's or run's
    that is still running is kept), ours alone (never a symlink or another user's)."""
    root = Path(tempfile.gettempdir())
    sweep_scratch(root, TRAIN_SCRATCH_PREFIX)
    return make_scratch_dir(root, TRAIN_SCRATCH_PREFIX)


def train(cfg: TrainConfig, **kw) -> dict[str, JSON]:
    """Train (or resume: ``cfg.resume``); returns a summary (also written to
    ``train.json`` of this rank's :func:`log_dir`)."""
    t0 = time.perf_counter()
    checkpoint = find_checkpoint(cfg)
    scratch = str(scratch_dir())
    ckpt_dir = Path(cfg.out) / "checkpoints"
    ckpt_existed = ckpt_dir.exists()
    trainer = pool = None
    try:
        trainer, rollout, pool = build_trainer(cfg, work_root=scratch, **kw)
        if checkpoint is not None:
            _resume_logs(cfg, checkpoint, rollout, trainer.callback_handler.callbacks)
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        out = Path(cfg.out)
        if cfg.save_model:
            trainer.save_model(str(out / "model"))
        losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
        summary = {
            "steps": trainer.state.global_step,
            "resumed_from": str(checkpoint) if checkpoint else None,
            "rank": dist_rank()[0],
            "losses": losses,
            "episodes": rollout.episodes,
            "expert_calls": sum(1 for d in rollout.decisions if d["action"]),
            "phase": rollout.split.phase,
            "transitions": rollout.split.transitions,
            "rollout": rollout.history,
            "seconds": time.perf_counter() - t0,
        }
        path = log_dir(out) / "train.json"
        path.write_text(json.dumps(summary, indent=2, default=float) + "\n")
        summary["trainer"], summary["rollout_func"] = trainer, rollout
        return summary
    finally:
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.close()
        shutil.rmtree(scratch, ignore_errors=True)
        if not ckpt_existed and not cfg.grpo.save_steps and dist_rank()[0] == 0:
            shutil.rmtree(ckpt_dir, ignore_errors=True)  # only TRL's model card, this run's


def run_cli(cfg: TrainConfig) -> dict[str, JSON]:
    """The body of ``python -m helpdp.train``."""
    res = train(cfg)
    last = res["rollout"][-1] if res["rollout"] else {}
    print(
        f"grpo: {res['steps']} steps, {res['episodes']} episodes, loss "
        f"{res['losses'][-1] if res['losses'] else float('nan'):.4g}, completion "
        f"{last.get('rollout/completion_rate', float('nan')):.2f}, expert calls "
        f"{res['expert_calls']}, phase {res['phase']} -> {cfg.out}  [{res['seconds']:.1f}s]"
    )
    return res
