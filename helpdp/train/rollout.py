"""The TRL glue: :class:`AWMRollout` is GRPOTrainer's ``rollout_func``.

``rollout_func(prompts, trainer) -> dict``: GRPOTrainer hands it the batch's
prompts (each task repeated ``num_generations`` times, consecutively) and gets
back, per rollout, ``prompt_ids``, ``completion_ids``, ``logprobs``, an
``env_mask`` (1: tokens the actor sampled; 0: tool responses, expert messages and
chat markup between turns, which the loss skips) and the episode facts the
reward functions read (see :mod:`collect.awm.rewards`).

An episode is run by the collector's own turn loop (:class:`collect.rollout.EpisodeRunner`
via :func:`collect.rollout.run_episodes`: the ``<tool_call>`` protocol, the
environment step, interventions, records). The only new piece is the actor,
:class:`TokenActor`: it keeps every episode as one token sequence and extends it
turn by turn (the feedback between turns is tokenized as a chat-template suffix,
TRL's own trick), so that the ids trained on are exactly the ids sampled. The
help gate is a :class:`~helpdp.train.gate.Gate` set as the runner's policy.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collect.awm.observation import render_observation
from collect.rollout import RunContext, TextRenderer, TurnReply, TurnRequest, run_episodes
from collect.schedule import EpisodeSpec, stable_int64
from collect.statekey import HistoryKeys
from helpdp.train.gate import Gate, SplitSchedule

if TYPE_CHECKING:
    from trl import GRPOTrainer

    from collect.awm.env import AWMEnv
    from collect.rollout import EpisodeLog
    from collect.types import Intervention, Pool

#: a GRPO prompt: the chat messages of a dataset row (or its text)
Prompt = list[dict[str, str]] | str

__all__ = [
    "AWMRollout",
    "GateRules",
    "HFBackend",
    "RolloutSettings",
    "TokenActor",
    "Timings",
    "VLLMBackend",
    "task_prompts",
]


def _cut_after_call(text: str) -> str:
    end = text.find("</tool_call>")
    return text if end < 0 else text[: end + len("</tool_call>")]


# ---------------------------------------------------------------------------
# generation backends: token ids in, token ids out
# ---------------------------------------------------------------------------


class HFBackend:
    """``transformers`` generation with the trainer's (or any) model, left-padded."""

    def __init__(self, model_fn, tokenizer, *, temperature=1.0, top_p=1.0, stop_after_call=True):
        self.model_fn = model_fn  # () -> the model to generate with (the trainer's, unwrapped)
        self.tok = tokenizer
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.stop = ["</tool_call>"] if stop_after_call else None

    def generate(self, prompts: list[list[int]], max_new: list[int], seed: int):
        import torch

        model = self.model_fn()
        pad = self.tok.pad_token_id
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        ids, mask = ids.to(model.device), mask.to(model.device)
        torch.manual_seed(int(seed) % (2**31))
        kw: dict[str, object] = {"max_new_tokens": max(max_new), "pad_token_id": pad}
        kw["eos_token_id"] = self.tok.eos_token_id
        if self.temperature > 0:
            kw.update(do_sample=True, temperature=self.temperature, top_p=self.top_p)
        else:
            kw["do_sample"] = False
        if self.stop:
            kw.update(stop_strings=self.stop, tokenizer=self.tok)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=mask, **kw)
        finally:
            model.train(was_training)
        result = []
        for i in range(len(prompts)):
            new = out[i, width:].tolist()
            while new and new[-1] == pad:
                new.pop()
            if self.tok.eos_token_id in new:
                new = new[: new.index(self.tok.eos_token_id) + 1]
            result.append((new[: max_new[i]], None))
        return result


class VLLMBackend:
    """vLLM through TRL (``use_vllm=True``, colocate or server): ``trainer.vllm_generation``.

    GPU only and not run in this repository. Stop strings and the per-call token
    limit come from ``GRPOConfig`` (``generation_kwargs={"stop": ["</tool_call>"],
    "include_stop_str_in_output": True}``, ``max_completion_length``); a turn longer
    than the rollout's remaining budget is cut.
    """

    def __init__(self, trainer):
        self.trainer = trainer

    def generate(self, prompts: list[list[int]], max_new: list[int], seed: int):
        _, completion_ids, logprobs, _ = self.trainer.vllm_generation.generate(
            prompts=prompts, images=None, num_generations=1
        )
        out = []
        for ids, lps, m in zip(completion_ids, logprobs, max_new):
            lp = [float(x[0]) if x and x[0] is not None else float("nan") for x in lps]
            out.append((list(ids)[:m], lp[:m]))
        return out


# ---------------------------------------------------------------------------
# the actor the episode runner drives
# ---------------------------------------------------------------------------


@dataclass
class _Seq:
    ids: list[int]
    prompt_len: int
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    n_messages: int = 0


class TokenActor:
    """An actor for :func:`collect.rollout.run_episodes` that keeps each episode's tokens.

    The first request of an episode is its prompt (the chat template of the
    system prompt and the task, plus help given before turn 0). Each later request
    holds the previous messages, the assistant turn (already in the tokens) and a
    new user message (the tool response, maybe with the expert's message or the
    refusal of an ask_expert): only that message is tokenized, as the template's
    suffix after an assistant turn, and masked.
    """

    name = "grpo"
    needs_solutions = False

    def __init__(
        self,
        backend,
        tokenizer,
        *,
        max_turn_tokens=512,
        max_completion=4096,
        chat_template_kwargs=None,
        stop_after_call=True,
    ):
        self.backend = backend
        self.tok = tokenizer
        self.max_turn_tokens = int(max_turn_tokens)
        self.max_completion = int(max_completion)
        self.kwargs = dict(chat_template_kwargs or {})
        self.stop_after_call = stop_after_call
        self.seqs: dict[int, _Seq] = {}
        self.seconds = 0.0
        self.turns = 0
        self._suffix_prefix: list[int] | None = None

    def _template(self, messages, generation: bool) -> list[int]:
        out = self.tok.apply_chat_template(
            list(messages), tokenize=True, add_generation_prompt=generation, **self.kwargs
        )
        if isinstance(out, dict) or hasattr(out, "keys"):
            out = out["input_ids"]
        return list(out)

    def suffix_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Tokens that follow an ended assistant turn (its EOS) up to the next
        assistant header, for ``messages`` (TRL's ``_get_tool_suffix_ids`` method)."""
        dummy = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "x"}]
        if self._suffix_prefix is None:
            prefix = self._template(dummy, False)
            eos = [i for i, t in enumerate(prefix) if t == self.tok.eos_token_id]
            self._suffix_prefix = prefix[: eos[-1] + 1] if eos else prefix
        prefix = self._suffix_prefix
        full = self._template(dummy + list(messages), True)
        if full[: len(prefix)] != prefix:
            raise ValueError("chat template: the dummy prefix is not a prefix of the full ids")
        return full[len(prefix) :]

    def reset(self) -> None:
        self.seqs.clear()

    def generate(self, requests: Sequence[TurnRequest]) -> list[TurnReply]:
        if not requests:
            return []
        started = time.perf_counter()
        prompts, budgets, live = [], [], []
        replies: list[TurnReply | None] = [None] * len(requests)
        for i, req in enumerate(requests):
            eid = req.view.spec.episode_id
            seq = self.seqs.get(eid)
            if seq is None:
                ids = self._template(req.messages, True)
                seq = self.seqs[eid] = _Seq(ids, len(ids))
            else:
                new = self.suffix_ids(req.messages[seq.n_messages + 1 :])
                seq.ids += new
                seq.mask += [0] * len(new)
                seq.logprobs += [0.0] * len(new)
            seq.n_messages = len(req.messages)
            room = self.max_completion - (len(seq.ids) - seq.prompt_len)
            if room <= 0:  # out of completion budget: an empty turn, i.e. answer now
                replies[i] = TurnReply("", len(seq.ids), 0)
                continue
            prompts.append(seq.ids)
            budgets.append(min(self.max_turn_tokens, room))
            live.append(i)
        if live:
            seed = sum(requests[i].seed for i in live)
            outs = self.backend.generate([list(p) for p in prompts], budgets, seed)
            for i, (ids, lps) in zip(live, outs):
                seq = self.seqs[requests[i].view.spec.episode_id]
                n_prompt = len(seq.ids)
                seq.ids += ids
                seq.mask += [1] * len(ids)
                seq.logprobs += lps if lps is not None else [0.0] * len(ids)
                if not ids or ids[-1] != self.tok.eos_token_id:  # close the turn (not sampled)
                    seq.ids.append(self.tok.eos_token_id)
                    seq.mask.append(0)
                    seq.logprobs.append(0.0)
                text = self.tok.decode(ids, skip_special_tokens=True)
                if self.stop_after_call:
                    text = _cut_after_call(text)
                replies[i] = TurnReply(text, n_prompt, len(ids))
        self.seconds += time.perf_counter() - started
        self.turns += len(requests)
        return [r for r in replies]  # type: ignore[misc]

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------
# the rollout function
# ---------------------------------------------------------------------------


def task_prompts(pool: Pool, tasks: Sequence[tuple[str, int]]) -> tuple[list[dict], dict]:
    """Dataset rows (``prompt``: the task as one user message, ``task_id``) and the
    lookup task text -> (scenario, task_idx) the rollout uses; texts must be unique.
    The task is rendered as data (:func:`collect.awm.observation.render_observation`),
    as the episode runner renders it for the actor: GRPOTrainer tokenizes the rows."""
    rows, lookup = [], {}
    for name, idx in tasks:
        text = render_observation(pool.scenario(name).task(idx).text)
        if text in lookup:
            raise ValueError(f"tasks {lookup[text]} and {(name, idx)} have the same text")
        lookup[text] = (name, int(idx))
        rows.append({"prompt": [{"role": "user", "content": text}], "task_id": f"{name}/{idx}"})
    return rows, lookup


class Timings:
    """Thread seconds and counts per kind of work (thread-safe sums).

    ``gate``: a help decision; ``expert``: an intervention; ``acquire``: an
    environment handed out by the pool (new ones build their state); ``reset``: the
    reset of a running environment (the database restored); ``cold_reset``: a reset
    that started an app worker; ``step``: an environment step that did not end the
    episode; ``end_step``: the step that ended it (the verifier runs there).
    """

    KINDS = ("gate", "expert", "acquire", "reset", "cold_reset", "step", "end_step")

    def __init__(self):
        self.lock = threading.Lock()
        self.seconds = dict.fromkeys(self.KINDS, 0.0)
        self.counts = dict.fromkeys(self.KINDS, 0)

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            self.seconds[name] += seconds
            self.counts[name] += 1

    def snapshot(self) -> tuple[dict[str, float], dict[str, int]]:
        with self.lock:
            return dict(self.seconds), dict(self.counts)

    # the sums the first version exposed
    gate = property(lambda self: self.seconds["gate"])
    expert = property(lambda self: self.seconds["expert"])
    gate_calls = property(lambda self: self.counts["gate"])


class _TimedPolicy:
    """The gate, timed; one decision at a time (the caps are shared by the batch's threads).

    The timer starts inside the lock: waiting for another thread's decision is not
    the gate's cost."""

    def __init__(self, inner: Gate, timings: Timings):
        self.inner, self.timings, self.name = inner, timings, inner.name
        self.lock = threading.Lock()

    def decide(self, views):
        with self.lock:
            t0 = time.perf_counter()
            try:
                return self.inner.decide(views)
            finally:
                self.timings.add("gate", time.perf_counter() - t0)


class _TimedEnv:
    """An environment of the pool whose ``reset`` and ``step`` are timed; everything
    else (tools, verify for the oracle, close, ...) is the environment's own."""

    def __init__(self, inner: AWMEnv, timings: Timings):
        self.__dict__["inner"] = inner
        self.__dict__["timings"] = timings

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def reset(self, *args: Any, **kwargs: Any):
        started = getattr(self.inner, "_workers_started", None)
        t0 = time.perf_counter()
        try:
            return self.inner.reset(*args, **kwargs)
        finally:
            cold = getattr(self.inner, "_workers_started", None) != started
            self.timings.add("cold_reset" if cold else "reset", time.perf_counter() - t0)

    def step(self, text: str):
        t0 = time.perf_counter()
        done = False
        try:
            result = self.inner.step(text)
            done = bool(result.done)
            return result
        finally:
            self.timings.add("end_step" if done else "step", time.perf_counter() - t0)


class _TimedPool:
    """The pool, handing out :class:`_TimedEnv` (released and closed unwrapped)."""

    def __init__(self, inner: Pool, timings: Timings):
        self.inner, self.timings = inner, timings

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def scenario(self, name: str):
        return self.inner.scenario(name)

    def acquire(self, name: str) -> _TimedEnv:
        t0 = time.perf_counter()
        try:
            return _TimedEnv(self.inner.acquire(name), self.timings)
        finally:
            self.timings.add("acquire", time.perf_counter() - t0)

    def release(self, env: AWMEnv | _TimedEnv) -> None:
        self.inner.release(env.inner if isinstance(env, _TimedEnv) else env)


class _TimedIntervention:
    def __init__(self, inner: Intervention, timings: Timings):
        self.inner, self.timings = inner, timings
        self.name, self.kind, self.config = inner.name, inner.kind, inner.config

    def available(self, calls_so_far: int) -> bool:
        return self.inner.available(calls_so_far)

    def help(self, view, env, rng):
        t0 = time.perf_counter()
        try:
            return self.inner.help(view, env, rng)
        finally:
            self.timings.add("expert", time.perf_counter() - t0)

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True)
class GateRules:
    """How the expert reaches an episode, and how often (the gate's side of a rollout).

    ``design``: ``"agent"`` (the actor calls ask_expert and the gate decides whether
    it is answered) or ``"proactive"`` (the gate decides at every turn, before the
    actor's); ``max_per_episode``: most expert calls granted in one episode (None: no
    cap); ``max_per_batch``: most in one rollout batch, shared by its episodes (None:
    no cap); ``denied_text``: the answer to an ask_expert the gate refuses.
    """

    design: str = "agent"
    max_per_episode: int | None = None
    max_per_batch: int | None = None
    denied_text: str = "The expert is not available now; continue on your own."


@dataclass(frozen=True)
class RolloutSettings:
    """How a rollout batch is run and recorded (everything but the gate).

    ``max_completion``: completion tokens kept per rollout; ``seed``: the episodes'
    seed (their entropy is drawn from it and the episode id); ``num_generations``:
    rollouts per task in a batch (None: the trainer's, or the whole batch);
    ``threads``: environment/expert threads per batch (None: one per episode);
    ``out``: the directory ``decisions.jsonl`` and ``episodes.jsonl`` are appended to
    (None: nothing written); ``log_metric(name, value)``: where the batch's metrics go
    (None: the trainer's ``_log_metric``, if any).
    """

    max_completion: int = 4096
    seed: int = 0
    num_generations: int | None = None
    threads: int | None = None
    out: str | Path | None = None
    log_metric: Callable[[str, float], None] | None = None


class AWMRollout:
    """GRPOTrainer's ``rollout_func`` for AWM tasks with a gated expert.

    ``actor_factory(trainer) -> TokenActor`` builds the actor on first use (the
    trainer's model, or vLLM); ``policy`` is the gate's HelpPolicy; ``split`` the
    expert/solo split; ``rules`` the gate's design and caps (:class:`GateRules`);
    ``settings`` the rest (:class:`RolloutSettings`), kept as attributes of the same
    names. Per call it records the episodes' logs (``last_logs``), the decisions
    (``decisions``), and appends to ``out/decisions.jsonl`` and
    ``out/episodes.jsonl`` when ``out`` is set.
    """

    def __init__(
        self,
        pool,
        interventions,
        lookup: dict,
        actor_factory,
        policy,
        split: SplitSchedule,
        *,
        rules: GateRules = GateRules(),
        settings: RolloutSettings = RolloutSettings(),
    ):
        self.pool = pool
        self.timings = Timings()
        self.interventions = [_TimedIntervention(iv, self.timings) for iv in interventions]
        self._criteria_seen = 0
        self.lookup = lookup
        self.actor_factory = actor_factory
        self.actor: TokenActor | None = None
        self.policy = policy
        self.split = split
        self.design = rules.design
        self.max_per_episode = rules.max_per_episode
        self.max_per_batch = rules.max_per_batch
        self.denied_text = rules.denied_text
        self.max_completion = int(settings.max_completion)
        self.threads = settings.threads
        self.seed = int(settings.seed)
        self.num_generations = settings.num_generations
        self.out = Path(settings.out) if settings.out else None
        self.log_metric = settings.log_metric
        self.step = 0
        self.episodes = 0
        self.decisions: list[dict] = []
        self.last_logs: list[EpisodeLog] = []
        self.last_output: dict | None = None
        self.last_stats: dict[str, float] = {}
        self.history: list[dict[str, float]] = []
        self.gate: Gate | None = None
        self._lock = threading.Lock()

    # -- helpers ------------------------------------------------------------------------
    def roles(self, prompts: Sequence[Prompt], group: int) -> list[bool]:
        """Expert (True) or solo per rollout: in each run of equal prompts, the first
        ``n_expert`` (the split's, scaled to the run's length) are expert rollouts."""
        flags: list[bool] = []
        i = 0
        while i < len(prompts):
            j = i
            while j < len(prompts) and prompts[j] == prompts[i]:
                j += 1
            k = j - i
            n = self.split.n_expert(group)
            n = n if k == group else int(round(n * k / max(group, 1)))
            flags += [r < n for r in range(k)]
            i = j
        return flags

    def _on_decision(self, runner, event: dict) -> None:
        event = {"step": self.step, **event}
        event["expert"] = bool(self.gate.expert.get(event["episode_id"])) if self.gate else False
        with self._lock:
            self.decisions.append(event)
            self._batch_decisions.append(event)

    def _task(self, prompt: Prompt) -> tuple[str, int]:
        text = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
        if text not in self.lookup:
            raise KeyError(f"rollout: a prompt that is no known task: {text[:80]!r}")
        return self.lookup[text]

    # -- the rollout function -------------------------------------------------------------
    def __call__(
        self, prompts: Sequence[Prompt], trainer: GRPOTrainer | None = None
    ) -> dict[str, list | None]:
        if self.actor is None:
            self.actor = self.actor_factory(trainer)
        actor = self.actor
        actor.reset()
        if self.log_metric is None and trainer is not None:
            self.log_metric = getattr(trainer, "_log_metric", None)
        group = self.num_generations or getattr(trainer, "num_generations", None) or len(prompts)
        flags = self.roles(prompts, int(group))
        specs = []
        for i, prompt in enumerate(prompts):
            name, idx = self._task(prompt)
            eid = self.episodes + i
            entropy = stable_int64("helpdp.train", self.seed, eid) & ((1 << 63) - 1)
            specs.append(
                EpisodeSpec(eid, name, idx, f"{name}/{idx}", "train", self.seed, (0.0,), entropy)
            )
        self.gate = Gate(
            self.policy,
            {s.episode_id: f for s, f in zip(specs, flags)},
            self.max_per_episode,
            self.max_per_batch,
        )
        self._batch_decisions: list[dict] = []
        ctx = RunContext(
            _TimedPool(self.pool, self.timings),
            self.interventions,
            HistoryKeys(),
            TextRenderer(2048),
            policy=_TimedPolicy(self.gate, self.timings),
            ask_mode=self.design,
            denied_text=self.denied_text,
            help_failure="nohelp",
            on_decision=self._on_decision,
        )
        sec0, n0 = self.timings.snapshot()
        gen0, turns0 = actor.seconds, actor.turns
        phases: dict[str, float] = {}
        t0 = time.perf_counter()
        logs = run_episodes(
            specs, actor, ctx, batch_size=len(specs), threads=self.threads, phase_seconds=phases
        )
        wall = time.perf_counter() - t0
        sec1, n1 = self.timings.snapshot()
        work = {k: sec1[k] - sec0[k] for k in sec1}
        counts = {k: n1[k] - n0[k] for k in n1}
        self.episodes += len(specs)
        self.last_logs = logs
        out = self._output(logs, flags)
        stats = self._stats(
            logs, flags, wall, actor.seconds - gen0, actor.turns - turns0, phases, work, counts
        )
        valid = [lg for lg in logs if lg.episode["outcome"] != "server_error"]
        self.split.observe([lg.episode["format_errors"] > 0 for lg in valid])
        self._write(logs, flags)
        self.last_output, self.last_stats = out, stats
        self.history.append(stats)
        if self.log_metric is not None:
            for k, v in stats.items():
                self.log_metric(k, float(v))
        self.step += 1
        return out

    def _output(self, logs: list[EpisodeLog], flags: list[bool]) -> dict[str, list | None]:
        actor = self.actor
        prompt_ids, completion_ids, env_mask, logprobs = [], [], [], []
        for lg in logs:
            seq = actor.seqs.get(lg.spec.episode_id)
            if seq is None:  # the environment never started: one masked EOS
                ids = actor._template([{"role": "user", "content": self._task_text(lg)}], True)
                seq = _Seq(ids + [actor.tok.eos_token_id], len(ids), [0], [0.0])
            comp = seq.ids[seq.prompt_len :][: self.max_completion]
            prompt_ids.append(seq.ids[: seq.prompt_len])
            completion_ids.append(comp)
            env_mask.append(seq.mask[: len(comp)])
            logprobs.append(seq.logprobs[: len(comp)])
        ep = [lg.episode for lg in logs]
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": None if all(not any(lp) for lp in logprobs) else logprobs,
            "env_mask": env_mask,
            "outcome": [e["outcome"] for e in ep],
            "end_reason": [e["end_reason"] for e in ep],
            "valid": [bool(e["valid"]) for e in ep],
            "blind_calls": [int(e["blind_calls"]) for e in ep],
            "recovery_calls": [int(e["recovery_calls"]) for e in ep],
            "expert_calls": [int(e["expert_calls"]) for e in ep],
            "format_errors": [int(e["format_errors"]) for e in ep],
            "turns": [int(e["steps"]) for e in ep],
            "role": ["expert" if f else "solo" for f in flags],
            "episode_id": [int(e["episode_id"]) for e in ep],
        }

    def _criteria_tokens(self) -> int:
        """The expert's tokens spent on success criteria since the last batch (once per
        task and process: not any episode's, see ``ExpertLLM.criteria``)."""
        total = sum(getattr(iv.inner, "criteria_tokens", 0) for iv in self.interventions)
        spent, self._criteria_seen = total - self._criteria_seen, total
        return spent

    def _task_text(self, lg) -> str:
        for text, key in self.lookup.items():
            if key == (lg.spec.scenario, lg.spec.task_idx):
                return text
        return ""

    def _stats(self, logs, flags, wall, gen, turns, phases, work, counts) -> dict[str, float]:
        """The batch's metrics. Time: ``time/*_s`` are wall seconds of the rounds'
        phases (``time/env_s``: resets and steps, run in threads, so wall time;
        ``time/other_s``: the rest, the runner's bookkeeping); ``env/*`` are thread
        seconds and counts per kind (see :class:`Timings`), i.e. the cost of one
        reset, step or decision whatever the threads overlap."""
        ep = [lg.episode for lg in logs]
        n = max(len(ep), 1)
        dec = self._batch_decisions
        asked = [d for d in dec if d["asked"] and d["expert"]]
        gate, expert = work["gate"], work["expert"]
        env = phases["start"] + phases["advance"]
        per = {
            f"env/{k}_s": work[k] for k in ("acquire", "reset", "cold_reset", "step", "end_step")
        }
        per.update({f"env/{k}s": counts[k] for k in ("acquire", "reset", "cold_reset", "step")})
        per["env/end_steps"] = counts["end_step"]
        per.update({"gate/seconds": gate, "gate/calls": counts["gate"], "expert/seconds": expert})
        return {
            "rollout/completion_rate": sum(e["outcome"] == "complete" for e in ep) / n,
            "rollout/format_error_rate": sum(e["format_errors"] > 0 for e in ep) / n,
            "rollout/format_ended_rate": sum(e["end_reason"] == "format_error" for e in ep) / n,
            "rollout/broken_episodes": sum(e["outcome"] == "server_error" for e in ep),
            "rollout/turns": turns,
            "rollout/turns_per_s": turns / wall if wall > 0 else 0.0,
            "expert/calls_blind": sum(e["blind_calls"] for e in ep) / n,
            "expert/calls_recovery": sum(e["recovery_calls"] for e in ep) / n,
            "expert/calls": sum(e["expert_calls"] for e in ep),
            "expert/errors": sum(1 for d in dec if d["error"]),
            "expert/tokens": sum(d["tokens"] for d in dec),
            "expert/criteria_tokens": self._criteria_tokens(),
            "gate/decisions": len(asked),
            "gate/granted": sum(1 for d in dec if d["gate"] > 0),
            "gate/errors": sum(1 for d in dec if d.get("gate_error")),
            "gate/asks": sum(1 for d in dec if d["asked"] and self.design == "agent"),
            "phase/expert_rollouts": sum(flags),
            "phase/format_error_rate_seen": self.split.rate,
            "time/gate_share": gate / wall if wall > 0 else 0.0,
            "time/env_share": env / wall if wall > 0 else 0.0,
            "time/expert_share": expert / wall if wall > 0 else 0.0,
            "time/generate_share": gen / wall if wall > 0 else 0.0,
            "time/wall_s": wall,
            "time/generate_s": phases["generate"],
            "time/request_s": phases["request"],
            "time/env_s": env,
            "time/other_s": max(wall - sum(phases.values()), 0.0),
            **per,
        }

    def _write(self, logs, flags) -> None:
        if self.out is None:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.out / "decisions.jsonl", "a") as f:
            for d in self._batch_decisions:
                f.write(json.dumps(d, default=str) + "\n")
        with open(self.out / "episodes.jsonl", "a") as f:
            for lg, flag in zip(logs, flags):
                row = {"step": self.step, "role": "expert" if flag else "solo", **lg.episode}
                f.write(json.dumps(row, default=str) + "\n")
