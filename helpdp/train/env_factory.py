"""TRL's ``environment_factory`` over our AWM runtime: ``GRPOTrainer(...,
environment_factory=factory.environments())``.

:class:`AWMEnvironmentFactory` makes, per scenario, an environment class whose public
methods are the world's tools (one method per visible tool: its name, its parameters
typed from the tool's JSON schema, its description as the docstring TRL renders) plus
``ask_expert``, gated by a :class:`~helpdp.policies.HelpPolicy` within
``max_per_episode`` calls; the gate sees the state as the collector's policies do
(:func:`helpdp.views.view_from_history` of the world's turns so far: a call of
``ask_expert`` is the help decision at a state, not a turn). TRL makes one instance
per rollout: ``reset(**example)`` starts the episode of the example's
``scenario``/``task_idx`` on an environment of the runtime, a tool call is one turn of :mod:`collect.awm.protocol` (``call_tool`` with the
method's arguments), and ``get_reward()`` ends the episode (the verifier judges the
world) and returns the graduated reward (:class:`~collect.awm.rewards.GraduatedReward`:
solo completion 2.0, recovery after an error with the expert 1.3, blind expert call
0.8, incomplete 0.1; an episode the infrastructure broke: None, left out of the group).

The runtime is any pool with :class:`collect.awm.env.EnvPool`'s interface: local
sandboxes (``EnvPool``), a ``collect.awm.serve`` server
(:class:`helpdp.train.envs.RemotePool`) or an OpenEnv AWM server
(:class:`collect.awm.remote_env.OpenEnvPool`). With several scenarios,
:meth:`~AWMEnvironmentFactory.environments` is TRL's ``{name: factory}`` form and every
dataset row names its scenario in ``environment`` (:meth:`~AWMEnvironmentFactory.rows`).

What ``rollout_func`` (:class:`helpdp.train.rollout.AWMRollout`) does and this cannot:
the gate acting between turns without being asked (``gate.design=proactive``), the
expert/solo split of each group (TRL does not tell an environment its place in the
group), help put into the prompt rather than returned as a tool result, the collector's
state ids (a ``table`` policy keyed on collected states), format errors as the agent's
(TRL parses the calls and answers a malformed one itself) and the final answer's text
(``get_reward`` takes none: the world's database is judged). Importing this module
imports neither torch nor trl.
"""

from __future__ import annotations

import inspect
import itertools
import json
import keyword
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from collect.awm.observation import render_observation
from collect.awm.protocol import format_call_tool
from collect.awm.rewards import GraduatedReward
from collect.rollout import WORLD_OUTPUT_KINDS
from collect.schedule import EpisodeSpec, stable_int64
from collect.statekey import arguments_sha
from collect.types import EpisodeView, Turn
from helpdp.jsonvalue import JSON
from helpdp.policies import HelpPolicy, Never
from helpdp.train.gate import Gate
from helpdp.views import view_from_history

if TYPE_CHECKING:
    from collect.awm.rewards import RewardFunc
    from collect.types import Intervention, Pool

__all__ = ["AWMEnvironmentFactory", "AWMToolEnvironment", "tool_method"]

#: names an environment needs for itself (a world tool so named is not offered)
RESERVED = frozenset({"reset", "get_reward", "ask_expert", "close"})
_JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _one_line(text: object) -> str:
    return re.sub(r"\s+", " ", str(text or "")).strip()


# transformers.utils.get_json_schema (what TRL calls on each method) reads the end of an
# argument's description, ``(choices: [...])``, as JSON (json.loads) into the schema's
# enum, which the chat template writes out decoded (``\\u003c`` is ``<`` there); and it
# splits a docstring at ``Args:``/``Returns:``/``Raises:`` anywhere in a line
_CHOICES = re.compile(r"\(choices:\s*(.*?)\)\s*$", re.IGNORECASE)
_CHOICES_OPEN = re.compile(r"\((choices):", re.IGNORECASE)
_SECTION = re.compile(r"\b(Args|Returns|Raises):")


def _as_text(rendered: str) -> str:
    """Rendered world text for a docstring: its section words and any ``(choices:`` no
    longer what the docstring parser reads as structure."""
    return _CHOICES_OPEN.sub(r"(\1&#58;", _SECTION.sub(r"\1&#58;", rendered))


def _render_json(value: JSON) -> JSON:
    """A decoded JSON value with every string (keys too) rendered for a docstring."""
    if isinstance(value, str):
        return _as_text(render_observation(value.strip()))
    if isinstance(value, list):
        return [_render_json(v) for v in value]
    if isinstance(value, dict):
        return {_render_json(str(k)): _render_json(v) for k, v in value.items()}
    return value


def _split_choices(desc: str) -> tuple[str, list | None]:
    """``(text, choices)``: an argument's description and its ``(choices: [...])`` block
    decoded as transformers decodes it (None: no block, or one it would fail on, not
    JSON or not a list, which then stays text)."""
    m = _CHOICES.search(desc)
    if m is None:
        return desc, None
    try:
        values = json.loads(m.group(1))
    except (ValueError, RecursionError):
        return desc, None
    if not isinstance(values, list):
        return desc, None
    return desc[: m.start()].strip(), values


def _choices(values: list | None) -> str:
    """The choices block again, each value rendered (the template writes the decoded
    values) and encoded as JSON."""
    if values is None:
        return ""
    return f" (choices: {json.dumps(_render_json(values), ensure_ascii=False)})"


def _py_type(schema: dict[str, JSON]) -> type:
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None:
        for option in schema.get("anyOf") or schema.get("oneOf") or []:
            if isinstance(option, dict) and option.get("type") not in (None, "null"):
                return _py_type(option)
    return _JSON_TYPES.get(kind, str)


class ToolSpec(Protocol):
    """A world tool as an environment lists it (``collect.awm.tools.Tool``, or the
    remote runtime's record of one)."""

    name: str
    description: str
    input_schema: dict[str, JSON]


def tool_method(tool: ToolSpec) -> Callable[..., str] | None:
    """A method calling the world's ``tool`` (``name``, ``description``, ``input_schema``)
    whose signature, type hints and Google-style docstring are what TRL (through
    ``transformers.utils.get_json_schema``) renders as the tool; None for a tool whose
    name cannot be a method (not an identifier, reserved, private)."""
    name = str(tool.name)
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        return None
    if name in RESERVED:
        return None
    schema = tool.input_schema or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, object] = {}  # a type, or a type | None
    docs = []
    for arg, spec in props.items():
        if not str(arg).isidentifier() or keyword.iskeyword(arg):
            continue
        spec = spec if isinstance(spec, dict) else {}
        kind = _py_type(spec)
        hint = kind if arg in required else (kind | None)
        hints[arg] = hint
        default = inspect.Parameter.empty if arg in required else None
        params.append(
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint)
        )
        # descriptions are the world's: rendered as data (TRL puts the docstring into the
        # system prompt's tools block), the choices as transformers will decode them
        desc, values = _split_choices(
            _one_line(spec.get("description") or spec.get("title") or arg)
        )
        desc = _as_text(render_observation(desc)) + _choices(values)
        docs.append(f"    {arg}: {desc.lstrip()}")
    params[1:] = sorted(params[1:], key=lambda p: p.default is not inspect.Parameter.empty)
    keep = set(hints)

    def method(self, **kwargs: JSON) -> str:
        arguments = {k: v for k, v in kwargs.items() if k in keep and v is not None}
        return self._call(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(params, return_annotation=str)
    method.__annotations__ = {**hints, "return": str}
    summary = _as_text(render_observation(_one_line(tool.description))) or f"Call {name}."
    method.__doc__ = summary + ("\n\nArgs:\n" + "\n".join(docs) if docs else "")
    return method


class AWMToolEnvironment:
    """One rollout's episode (TRL makes one instance per rollout and reuses it across
    batches). Subclassed per scenario by :class:`AWMEnvironmentFactory`, which adds
    the world's tools as methods."""

    factory: AWMEnvironmentFactory
    scenario_name: str

    def __init__(self) -> None:
        self.env = None
        self.result = None  # the last step's StepResult
        self.view: EpisodeView | None = None
        self.records: list[dict[str, JSON]] = []  # the world turns, as helpdp.views reads them
        self.helped: list[int] = []  # the help granted at the current state
        self.episode_id = -1
        self.errors = self.blind = self.recovery = 0
        self.ended = False
        self.last_reward: float | None = None
        self.outcome: str | None = None

    # -- TRL's interface -----------------------------------------------------------------
    def reset(self, scenario: str | None = None, task_idx: int = 0, **example: JSON) -> None:
        """Start the episode of the example (its task is already the prompt)."""
        f = self.factory
        name = scenario or self.scenario_name
        if self.env is None or self.env.scenario.name != name:
            self._drop()
            self.env = f.pool.acquire(name)
        self.episode_id = f.next_episode_id()
        idx = int(task_idx)
        sc = f.pool.scenario(name)
        entropy = stable_int64("helpdp.env_factory", f.seed, self.episode_id) & ((1 << 63) - 1)
        spec = EpisodeSpec(
            self.episode_id, name, idx, f"{name}/{idx}", "train", f.seed, (0.0,), entropy
        )
        first = self.env.reset(idx, episode_id=str(self.episode_id))
        self.view = EpisodeView(
            spec,
            render_observation(first.task),
            [t.name for t in self.env.tools],
            sc.solutions.get(idx),
            [],
        )
        f.gate.expert[self.episode_id] = True
        self.errors = self.blind = self.recovery = 0
        self.records, self.helped = [], []
        self.result = None
        self.ended = False
        return None

    def ask_expert(self, question: str) -> str:
        """Ask a human expert for help when you are unsure how to proceed.

        Args:
            question: what you need help with
        """
        f, view = self.factory, self.view
        if view is None or self.ended or not f.interventions:
            return f.denied_text
        t = len(view.history)
        # the state as the collector's views have it: its turns are the world's (an
        # ask_expert is the help decision at the state, not a turn of the actor)
        state = view_from_history(
            self.records,
            state_id=0,
            task_id=view.spec.task_id,
            text=self.env.trajectory_text(),
            episode_id=self.episode_id,
            pending=len(self.helped),
        )
        try:
            action = int(f.gate.decide([state])[0])
        except RuntimeError:  # the policy failed: nohelp (Gate kept its error)
            action = 0
        if not action:
            self._turn(0, None, {"kind": "ask_expert", "arguments": {"question": question}}, "")
            return f.denied_text
        iv = f.interventions[min(action, len(f.interventions)) - 1]
        help_ = iv.help(view, self.env, np.random.default_rng(view.spec.entropy + t))
        if self.errors:
            self.recovery += 1
        else:
            self.blind += 1
        self.helped.append(action)
        self._turn(action, help_, {"kind": "ask_expert", "arguments": {"question": question}}, "")
        return help_.text

    def get_reward(self) -> float | None:
        """End the episode (verification) and return the graduated reward."""
        if self.env is None or self.view is None:
            return None
        if not self.ended:
            self._step("")  # no tool call: the final answer; the verifier judges the world
        info = self.result.info if self.result is not None else {}
        row = {
            "outcome": [str(info.get("outcome") or "server_error")],
            "valid": [bool(info.get("valid", False))],
            "blind_calls": [self.blind],
            "recovery_calls": [self.recovery],
        }
        self.last_reward = self.factory.reward([""], [""], **row)[0]
        self.outcome = row["outcome"][0]
        return self.last_reward

    # -- the world's tools ---------------------------------------------------------------
    def _call(self, name: str, arguments: dict[str, JSON]) -> str:
        if self.view is None or self.ended:
            return "Error: the episode is over."
        result = self._step(format_call_tool(name, arguments))
        return result.observation  # rendered by _step (TRL puts it into the tool message)

    def _step(self, text: str):
        try:
            result = self.env.step(text)
        except Exception as e:  # noqa: BLE001 - the runtime failed: a broken episode
            from collect.awm.episode import StepResult

            result = StepResult(
                f"Error: server error ({type(e).__name__})",
                None,
                True,
                {"outcome": "server_error", "valid": False},
            )
        self.result = result
        info = result.info
        if (info.get("action") or {}).get("kind") in WORLD_OUTPUT_KINDS:  # the world's text
            result.observation = render_observation(result.observation or "")
        if info.get("failure") is not None:
            self.errors += 1
        parsed = info.get("action") or {}
        self.records.append(
            {
                "kind": str(parsed.get("kind") or "error"),
                "tool_name": parsed.get("tool_name"),
                "failure": info.get("failure"),
                "format_error": bool(info.get("format_error", False)),
                "args_sha": arguments_sha(parsed.get("arguments")),
                "action": self.helped[-1] if self.helped else 0,
            }
        )
        self.helped = []
        self._turn(
            0, None, info.get("action") or {}, result.observation or "", text, info.get("failure")
        )
        if result.done:
            self.ended = True
        return result

    def _turn(self, action, help_, parsed, observation, text="", failure=None) -> None:
        view = self.view
        view.history.append(
            Turn(len(view.history), action, help_, text, dict(parsed), failure, observation)
        )

    def _drop(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            self.factory.pool.release(env)


class AWMEnvironmentFactory:
    """Environment classes of a runtime's scenarios, for TRL's ``environment_factory``.

    ``pool``: the runtime (``EnvPool``, ``RemotePool``, ``OpenEnvPool``); ``scenarios``:
    which ones (their tools are listed once, through an episode of task 0);
    ``interventions``: the expert (the first one answers ``ask_expert``; none: it is
    always denied); ``policy``: the gate (default :class:`~helpdp.policies.Never`);
    ``max_per_episode``: granted calls per episode; ``reward``: the graduated reward;
    ``tools``: offer only these world tools (None: all; each tool's schema is part of
    every prompt, so a world with many tools makes long prompts).
    """

    def __init__(
        self,
        pool: Pool,
        scenarios: Sequence[str],
        *,
        interventions: Sequence[Intervention] = (),
        policy: HelpPolicy | None = None,
        max_per_episode: int | None = 2,
        reward: RewardFunc | None = None,
        denied_text: str = "The expert is not available now; continue on your own.",
        seed: int = 0,
        tools: Sequence[str] | None = None,
    ):
        if not scenarios:
            raise ValueError("AWMEnvironmentFactory needs at least one scenario")
        self.pool = pool
        self.interventions = list(interventions)
        self.gate = Gate(policy or Never(), {}, max_per_episode=max_per_episode)
        self.reward = reward or GraduatedReward()
        self.denied_text = denied_text
        self.seed = int(seed)
        self.only = set(tools) if tools is not None else None
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self.classes: dict[str, type[AWMToolEnvironment]] = {}
        self.skipped_tools: dict[str, list[str]] = {}
        for name in scenarios:
            self.classes[name] = self._class(name)

    def next_episode_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _class(self, name: str) -> type[AWMToolEnvironment]:
        env = self.pool.acquire(name)
        try:
            env.reset(0)
            tools = list(env.tools)
        finally:
            self.pool.release(env)
        methods: dict[str, Callable[..., str]] = {}
        skipped = []
        for tool in tools:
            if self.only is not None and tool.name not in self.only:
                continue
            m = tool_method(tool)
            if m is None:
                skipped.append(str(tool.name))
            else:
                methods[m.__name__] = m
        self.skipped_tools[name] = skipped
        cls_name = "AWM_" + re.sub(r"\W", "_", name)
        return type(
            cls_name, (AWMToolEnvironment,), {**methods, "factory": self, "scenario_name": name}
        )

    def environments(self) -> type[AWMToolEnvironment] | dict[str, type[AWMToolEnvironment]]:
        """TRL's ``environment_factory``: the class of the one scenario, or ``{scenario:
        class}`` (rows then carry ``environment``)."""
        if len(self.classes) == 1:
            return next(iter(self.classes.values()))
        return dict(self.classes)

    def rows(self, tasks: Sequence[tuple[str, int]]) -> list[dict[str, JSON]]:
        """Dataset rows: the task as the prompt, ``scenario`` and ``task_idx`` (for
        ``reset``), and ``environment`` when there are several scenarios."""
        out = []
        for name, idx in tasks:
            text = render_observation(self.pool.scenario(name).task(int(idx)).text)
            row = {
                "prompt": [{"role": "user", "content": text}],
                "scenario": name,
                "task_idx": int(idx),
            }
            if len(self.classes) > 1:
                row["environment"] = name
            out.append(row)
        return out
