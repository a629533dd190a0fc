"""Interventions: what "help" does at a step where the schedule triggers it.

Each intervention has a name (its entry in the manifest's ``actions``; action k
is the k-th configured intervention) and returns a :class:`~collect.types.Help`
whose text is put into the actor's context before it generates its turn.

* ``oracle``: verifier-informed and knows the reference solution. It gives the
  next correct call (the first reference call the episode has not yet made
  successfully, in order) as a ready tool call; when the verifier already passes
  on the current database (or every reference call is done) it says to answer now.
  A state-wise intervention: its advice depends only on the state.
* ``expert_llm``: the reference recipe's ``ask_expert``. An OpenAI-compatible model gets the
  task, the tool schemas, success criteria distilled from the task's verifier
  code, the trajectory so far and the recent errors, and returns a plan.

``max_calls`` bounds the calls per episode; an intervention out of calls is not
available (the step takes nohelp).
"""

from __future__ import annotations

import abc
import ast
import io
import re
import threading
import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from collect.awm.llm import ChatClient, EndpointConfig
from collect.awm.observation import render_observation
from collect.awm.protocol import format_call_tool
from collect.awm.tools import format_tools
from collect.rollout import reference_progress
from collect.types import EpisodeView, Help
from helpdp.cliconf import doc_field as _f
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    import httpx2
    import numpy as np

    from collect.awm.dataset import Scenario
    from collect.awm.env import AWMEnv

__all__ = [
    "CRITERIA_MODES",
    "INTERVENTION_KINDS",
    "BaseIntervention",
    "ExpertLLM",
    "InterventionConfig",
    "Oracle",
    "build_interventions",
    "static_criteria",
]

INTERVENTION_KINDS = ("oracle", "expert_llm")
CRITERIA_MODES = ("llm", "static", "code", "none")


@dataclass
class InterventionConfig(EndpointConfig):
    """One intervention (fields name the kinds that use them; the endpoint's are expert_llm's)."""

    kind: str = _f("oracle", "oracle | expert_llm")
    max_calls: Any = _f(
        None, "most calls per episode (null: unlimited); then the step takes nohelp"
    )
    header: str = _f("Expert help:", "first line of the message put into the actor's context")
    use_verifier: bool = _f(True, "oracle: run the task's verifier to tell the actor it is done")
    temperature: float = _f(0.0, "expert_llm: sampling temperature")
    max_tokens: int = _f(512, "expert_llm: most tokens of one plan")
    criteria: str = _f(
        "llm",
        "expert_llm: success criteria from the verifier code: llm (the expert model "
        "summarizes the code once per task), static (the code's comments, queries and "
        "literals), code (the code itself), none",
    )
    max_history_chars: int = _f(12000, "expert_llm: trajectory characters sent (the most recent)")
    error_turns: int = _f(3, "expert_llm: most recent failed turns listed as the error context")


def _call_text(call: dict[str, JSON]) -> str:
    """The reference call as a turn; its name and arguments (dataset text) rendered as
    data (:func:`collect.awm.observation.render_observation`), the tags are ours."""
    name = call.get("tool_name")
    name = render_observation(name) if isinstance(name, str) else name
    args = _render_values(call.get("arguments") or {})
    return format_call_tool(name, args)


def _render_values(value: JSON) -> JSON:
    """``value`` (JSON) with every string, keys included, rendered as data."""
    if isinstance(value, str):
        return render_observation(value)
    if isinstance(value, dict):
        return {render_observation(str(k)): _render_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_values(v) for v in value]
    return value


class BaseIntervention(abc.ABC):
    """Shared by the shipped kinds (each a :class:`collect.types.Intervention`): name,
    call budget; ``help`` gives the message."""

    kind = ""
    needs_solutions = False
    criteria_tokens = 0  # expert tokens this process spent outside any episode's help

    def __init__(self, name: str, config: InterventionConfig):
        self.name = name
        self.config = config

    def available(self, calls_so_far: int) -> bool:
        limit = self.config.max_calls
        return limit is None or calls_so_far < int(limit)

    @abc.abstractmethod
    def help(self, view: EpisodeView, env: AWMEnv, rng: np.random.Generator) -> Help:
        """The help at the view's state (``env``: the episode's environment)."""

    def close(self) -> None:  # noqa: B027 - nothing to release unless a kind holds a client
        """Release clients (HTTP connections)."""


class Oracle(BaseIntervention):
    """The next correct call from the reference solution, or "answer now" (verifier-informed)."""

    kind = "oracle"
    needs_solutions = True

    def help(self, view: EpisodeView, env: AWMEnv, rng: np.random.Generator) -> Help:
        head = self.config.header
        solution = view.solution
        if solution is None:
            raise RuntimeError(f"no reference solution for {view.spec.task_id}")
        k = reference_progress(view.history, solution.calls)
        done = k >= len(solution.calls)
        acted = any(t.failure is None and t.parsed.get("kind") == "call_tool" for t in view.history)
        if not done and self.config.use_verifier and acted:
            done = env.verify(None).outcome == "complete"
        if done:
            final = render_observation(str(solution.final_answer or ""), (head,))
            answer = f' Your answer: "{final}"' if final else ""
            text = (
                f"{head} the task is complete. Do not call more tools; reply with your final "
                f"answer now, without a tool call.{answer}"
            )
            return Help(self.name, self.kind, text, final=True)
        call = solution.calls[k]
        text = f"{head} the next step is this call:\n{_call_text(call)}"
        return Help(self.name, self.kind, text, call=dict(call))


# ---------------------------------------------------------------------------
# the LLM expert
# ---------------------------------------------------------------------------

EXPERT_SYSTEM = (
    "You are an expert operator of a web application, helping an AI agent that works through "
    "the application's tools. You know the tools and what the task requires to count as done. "
    "Give the agent a short, concrete plan for its next steps: which tool to call next and with "
    "which arguments, and how to recover from its errors. Write at most eight numbered steps, no "
    "preamble."
)

CRITERIA_SYSTEM = (
    "You read a verification function that checks, on the application's database after an "
    "agent's episode, whether a task was done. List the success criteria it enforces as short "
    "bullet points in plain language (what must change, what must stay unchanged, exact values). "
    "Do not mention the code itself."
)


def static_criteria(code: str, max_items: int = 40) -> str:
    """Success criteria read from verifier code without a model: its docstrings and
    comments, the SQL it runs and the literal values it compares against."""
    notes: list[str] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        tokens = []
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            notes.append(tok.string.lstrip("#").strip())
    queries: list[str] = []
    values: list[str] = []
    try:
        tree = ast.parse(code)
    except SyntaxError:
        tree = None
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    notes.insert(0, doc.strip())
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                s = " ".join(node.value.split())
                if not s or s in queries or s in values:
                    continue
                if re.match(r"(?i)^(select|with)\b", s):
                    queries.append(s)
                elif len(s) <= 80 and s not in ("complete", "others", "result"):
                    values.append(s)
    lines = []
    if notes:
        lines.append("Notes from the checker:")
        lines += [f"- {n}" for n in notes[:max_items] if n]
    if queries:
        lines.append("The checker compares the database before and after with these queries:")
        lines += [f"- {q}" for q in queries[:max_items]]
    if values:
        lines.append("Values it looks for: " + ", ".join(repr(v) for v in values[:max_items]))
    return "\n".join(lines) or "(no criteria could be read from the checker)"


class ExpertLLM(BaseIntervention):
    """The reference recipe's ``ask_expert``: a plan from an OpenAI-compatible model."""

    kind = "expert_llm"

    def __init__(
        self,
        name: str,
        config: InterventionConfig,
        *,
        transport: httpx2.BaseTransport | None = None,
    ):
        super().__init__(name, config)
        if config.criteria not in CRITERIA_MODES:
            raise ValueError(f"criteria must be one of {CRITERIA_MODES}, got {config.criteria!r}")
        if not config.model:
            raise ValueError(f"intervention {name!r}: model is required for expert_llm")
        self.client = ChatClient(config, transport=transport)
        self._criteria: dict[tuple[str, int], str] = {}
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._lock = threading.Lock()
        self.criteria_tokens = 0  # the expert's tokens spent distilling criteria, this process

    def criteria(self, scenario: Scenario, task_idx: int, task: str) -> str:
        """A task's success criteria, made once per task and process (the episodes of a
        batch that ask at once wait for one request). Its tokens are the process's
        (``criteria_tokens``), not an episode's: which episode asks first depends on
        threads and on where a run resumed, and an episode's ``expert_tokens`` must not."""
        key = (scenario.name, task_idx)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._criteria:
                text, tokens = self._make_criteria(scenario, task_idx, task)
                self._criteria[key] = text
                with self._lock:
                    self.criteria_tokens += tokens
            return self._criteria[key]

    def _make_criteria(self, scenario: Scenario, task_idx: int, task: str) -> tuple[str, int]:
        record = scenario.verifiers.get(task_idx) or scenario.sql_verifiers.get(task_idx)
        mode = self.config.criteria
        tokens = 0
        # the verifier's code and the task are the dataset's: rendered as data everywhere
        code = render_observation(record.code) if record is not None else ""
        if mode == "none" or record is None:
            text = "(not available)"
        elif mode == "code":
            text = code
        elif mode == "static":
            text = render_observation(static_criteria(record.code))
        else:
            request = f"Task: {render_observation(task)}\n\n```python\n{code}\n```"
            r = self.client.complete(
                [
                    {"role": "system", "content": CRITERIA_SYSTEM},
                    {"role": "user", "content": request},
                ],
                temperature=0.0,
                max_tokens=self.config.max_tokens,
                seed=0,
            )
            text = render_observation(r.text.strip())
            tokens = r.prompt_tokens + r.completion_tokens
        return text, tokens

    def messages(self, view: EpisodeView, env: AWMEnv, criteria: str) -> list[dict[str, str]]:
        """The expert's request. Every part the world wrote (the task, the tool list from
        the app's OpenAPI or a remote server, the criteria, the trajectory with the
        actor's text, the errors) is rendered as data: one rendering, idempotent."""
        trajectory = render_observation(env.trajectory_text()) or "(nothing yet)"
        limit = self.config.max_history_chars
        if limit and len(trajectory) > limit:
            trajectory = "... (earlier turns omitted)\n" + trajectory[-limit:]
        failed = [t for t in view.history if t.failure is not None][-self.config.error_turns :]
        errors = "\n".join(
            f"- turn {t.t + 1} ({t.failure}): {render_observation(t.observation)[:600]}"
            for t in failed
        )
        task, tools = render_observation(view.task), render_observation(format_tools(env.tools))
        user = (
            f"## Task\n{task}\n\n## Tools\n{tools}\n\n"
            f"## Success criteria\n{render_observation(criteria)}\n\n"
            f"## The agent's trajectory so far\n{trajectory}\n\n"
            f"## Recent errors\n{errors or '(none)'}\n\nWhat should the agent do next?"
        )
        return [{"role": "system", "content": EXPERT_SYSTEM}, {"role": "user", "content": user}]

    def help(self, view: EpisodeView, env: AWMEnv, rng: np.random.Generator) -> Help:
        criteria = self.criteria(env.scenario, view.spec.task_idx, view.task)
        seed = int(rng.integers(0, 2**31 - 1))
        r = self.client.complete(
            self.messages(view, env, criteria),
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            seed=seed,
        )
        # the reply may repeat what the world wrote: the actor reads it as data too
        reply = render_observation(r.text.strip(), (self.config.header,))
        text = f"{self.config.header}\n{reply}"
        return Help(self.name, self.kind, text, tokens=r.prompt_tokens + r.completion_tokens)

    def close(self) -> None:
        self.client.close()


def build_interventions(configs: dict[str, InterventionConfig]) -> list[BaseIntervention]:
    """Interventions in configuration order (action k = the k-th)."""
    if not configs:
        raise ValueError("interventions is empty: a collection needs at least one")
    out: list[BaseIntervention] = []
    for name, cfg in configs.items():
        if name == "nohelp" or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            raise ValueError(f"intervention name {name!r}: use letters, digits, _ (not 'nohelp')")
        if cfg.kind == "oracle":
            out.append(Oracle(name, cfg))
        elif cfg.kind == "expert_llm":
            out.append(ExpertLLM(name, cfg))
        else:
            raise ValueError(f"intervention {name!r}: kind must be one of {INTERVENTION_KINDS}")
    return out
