"""Where the rollout's episodes run: local sandboxed workers (``collect.awm.EnvPool``)
or a ``python -m collect.awm.serve`` server (:class:`RemotePool`), behind the one
interface :class:`collect.rollout.EpisodeRunner` uses (``scenario``, ``acquire``,
``release``; an environment's ``reset``, ``step``, ``tools``, ``close``)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from collect.awm.client import EnvClient
from collect.awm.dataset import AWMDataset
from collect.awm.env import EnvConfig, EnvPool
from collect.awm.episode import ResetResult, StepResult
from collect.awm.observation import render_observation
from helpdp.jsonvalue import JSON
from helpdp.train.config import TrainConfig

if TYPE_CHECKING:
    from collect.awm.dataset import Scenario

__all__ = ["RemoteEnv", "RemotePool", "build_pool", "check_remote", "worlds_dir"]


def worlds_dir(worlds: str | Path | None) -> Path:
    """The AWM directory ``worlds`` (null: the shipped demo worlds)."""
    if worlds:
        return Path(worlds)
    import collect as collect

    return Path(collect.__file__).resolve().parent / "worlds"


class RemoteEnv:
    """One server session as an environment of :class:`collect.rollout.EpisodeRunner`.

    Offered remotely: ``reset``, ``step`` (a turn's text), ``tools`` (names,
    descriptions, schemas: ``format_tools`` works), ``scenario`` (the local copy:
    tasks, reference solutions, verifier code) and ``trajectory_text`` (kept here
    from the steps' public metadata), i.e. what the oracle without its verifier
    shortcut and ``expert_llm`` read. Not offered: ``verify`` and ``db_digest`` (the
    server never lets the verifier's result or the database out before the end).
    The episode's settings (``max_turns``, ``expert_enabled``,
    ``terminate_on_format_error``) are the server's.
    """

    def __init__(
        self, url: str, token: str | None, scenario: Scenario, tools: list[SimpleNamespace]
    ):

        self.client = EnvClient(url, token=token)
        self.scenario = scenario
        self.tools = tools
        self.app = None
        self.trajectory: list[dict[str, JSON]] = []

    def reset(self, task_idx: int, *, episode_id: str | None = None) -> ResetResult:
        obs = self.client.reset(self.scenario.name, task_idx, episode_id=episode_id)["observation"]
        self.trajectory = []
        return ResetResult(
            str(obs.get("episode_id") or episode_id or ""),
            self.scenario.name,
            task_idx,
            str(obs.get("task", "")),
            str(obs.get("system_prompt", "")),
        )

    def step(self, text: str) -> StepResult:
        reply = self.client.step(text)
        obs = reply["observation"]
        info = dict(obs.get("metadata") or {})
        observation = str(obs.get("text") or "")
        action = info.get("action") or {}
        self.trajectory.append(
            {"turn": len(self.trajectory) + 1, "action": action, "observation": observation}
        )
        return StepResult(observation, reply.get("reward"), bool(reply.get("done")), info)

    def trajectory_text(self, final_answer: str | None = None) -> str:
        """:meth:`collect.awm.env.AWMEnv.trajectory_text` from the client's side: what
        the server sent (observations, the actions it parsed) rendered as data."""
        lines = []
        for entry in self.trajectory:
            action = entry["action"]
            kind = action.get("kind")
            if kind == "call_tool":
                args = json.dumps(action.get("arguments"), default=str)
                lines.append(f"[{entry['turn']}] call {action.get('tool_name')} {args}")
            elif kind == "final":
                continue
            else:
                lines.append(f"[{entry['turn']}] {kind} {action.get('message') or ''}".rstrip())
            if entry["observation"]:
                lines.append(f"  -> {render_observation(entry['observation'])[:1500]}")
        if final_answer:
            lines.append(f"[final answer] {final_answer}")
        return render_observation("\n".join(lines))

    def verify(self, answer: JSON = None):
        raise RuntimeError(REMOTE_NO_VERIFY)

    def db_digest(self) -> str:
        raise RuntimeError("the database digest is not offered by the server")

    def close(self) -> None:
        self.client.close()


REMOTE_NO_VERIFY = (
    "the collect.awm.serve server does not offer verification to its clients (the "
    "verifier's result stays on the server until the episode ends)"
)


class RemotePool:
    """Sessions on a ``collect.awm.serve`` server (one per episode; the server reuses
    its environments); scenarios (tasks, reference solutions) are read from the local
    copy of the worlds. The token is read from ``$token_env``."""

    def __init__(self, url: str, worlds: str | Path | None, token_env: str = "HELPDP_SERVE_TOKEN"):
        self.url = url.rstrip("/")
        self.token = os.environ.get(token_env) or None
        self.dataset = AWMDataset(worlds_dir(worlds))
        self._scenarios: dict[str, Scenario] = {}
        self._tools: dict[str, list[SimpleNamespace]] = {}  # name, description, input_schema
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return self.dataset.names()

    def scenario(self, name: str) -> Scenario:
        with self._lock:
            if name not in self._scenarios:
                self._scenarios[name] = self.dataset.get(name)
            return self._scenarios[name]

    def tools(self, name: str) -> list[SimpleNamespace]:
        """The scenario's tools, listed once through a session of their own (a
        ``list_tools`` counts as a turn of the episode it is made in)."""

        with self._lock:
            if name in self._tools:
                return self._tools[name]
        with EnvClient(self.url, token=self.token) as client:
            client.reset(name, 0)
            listed = client.list_tools()["observation"].get("tools") or []
        tools = [
            SimpleNamespace(
                name=t.get("name", ""),
                description=t.get("description") or "",
                input_schema=t.get("input_schema") or {},
            )
            for t in listed
        ]
        with self._lock:
            return self._tools.setdefault(name, tools)

    def acquire(self, name: str) -> RemoteEnv:
        return RemoteEnv(self.url, self.token, self.scenario(name), self.tools(name))

    def release(self, env: RemoteEnv) -> None:
        env.close()

    def close(self) -> None:
        pass


def check_remote(cfg: TrainConfig) -> None:
    """Refuse, with one message, what the server route cannot run: the oracle's
    verifier shortcut (``interventions.NAME.use_verifier``)."""
    for name, iv in cfg.interventions.items():
        if iv.kind == "oracle" and iv.use_verifier:
            raise ValueError(
                f"rollout.server_url: {REMOTE_NO_VERIFY}, and interventions.{name} is the "
                f"oracle with use_verifier=true. Set interventions.{name}.use_verifier=false "
                f"(the oracle then says 'answer now' once the reference calls are made), use "
                f"kind=expert_llm, or run local sandboxes (rollout.server_url='')."
            )


def build_pool(cfg: TrainConfig, work_root: str | None = None):
    """The pool of a training config."""
    import dataclasses

    if cfg.rollout.server_url:
        check_remote(cfg)
        return RemotePool(cfg.rollout.server_url, cfg.tasks.worlds, cfg.rollout.server_token_env)

    env = EnvConfig()
    env = dataclasses.replace(
        env,
        max_turns=int(cfg.rollout.max_turns),
        terminate_on_format_error=bool(cfg.rollout.terminate_on_format_error),
        expert_enabled=cfg.gate.design == "agent",
        work_root=work_root or None,
        max_idle_envs=cfg.rollout.max_idle_envs,
    )
    scenarios = list(cfg.tasks.scenarios) if cfg.tasks.scenarios else None
    return EnvPool(worlds_dir(cfg.tasks.worlds), env, scenarios=scenarios)
