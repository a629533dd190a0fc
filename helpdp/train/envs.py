"""Where the rollout's episodes run: local sandboxed workers (``collect.awm.EnvPool``)
or a ``python -m collect.awm.serve`` server (:class:`RemotePool`), behind the one
interface :class:`collect.rollout.EpisodeRunner` uses (``scenario``, ``acquire``,
``release``; an environment's ``reset``, ``step``, ``tools``, ``close``)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from collect.awm.dataset import AWMDataset
from collect.awm.env import ResetResult, StepResult

__all__ = ["RemoteEnv", "RemotePool", "build_pool", "worlds_dir"]


def worlds_dir(worlds: Any) -> Path:
    """The AWM directory ``worlds`` (null: the shipped demo worlds)."""
    if worlds:
        return Path(worlds)
    import collect

    return Path(collect.__file__).resolve().parent / "worlds"


class RemoteEnv:
    """One server session as an environment (``verify`` is not offered remotely)."""

    def __init__(self, url: str, token: str | None, scenario: str):
        from collect.awm.serve import EnvClient

        self.client = EnvClient(url, token=token)
        self.scenario = scenario
        self.tools: list[Any] = []
        self.app = None

    def reset(self, task_idx: int, *, episode_id: str | None = None) -> ResetResult:
        reply = self.client.reset(self.scenario, task_idx, episode_id=episode_id)
        obs = reply["observation"]
        meta = obs.get("metadata") or obs
        tools = self.client.list_tools().get("observation", {}).get("tools") or []
        self.tools = [SimpleNamespace(name=t.get("name", "")) for t in tools]
        return ResetResult(
            str(meta.get("episode_id", episode_id or "")),
            self.scenario,
            task_idx,
            str(meta.get("task", "")),
            str(meta.get("system_prompt", "")),
        )

    def step(self, text: str) -> StepResult:
        reply = self.client.step(text)
        obs = reply["observation"]
        return StepResult(
            str(obs.get("text", "")),
            reply.get("reward"),
            bool(reply.get("done")),
            dict(obs.get("metadata") or {}),
        )

    def verify(self, answer: Any = None):  # the oracle's shortcut: not available remotely
        raise RuntimeError("verification is not offered by the server")

    def close(self) -> None:
        self.client.close()


class RemotePool:
    """Sessions on a ``collect.awm.serve`` server; scenarios (tasks, reference
    solutions for the oracle) are read from the local copy of the worlds."""

    def __init__(self, url: str, worlds: Any, token_env: str = "HELPDP_SERVE_TOKEN"):
        self.url = url
        self.token = os.environ.get(token_env) or None
        self.dataset = AWMDataset(worlds_dir(worlds))

    def scenario(self, name: str):
        return self.dataset.get(name)

    def acquire(self, name: str) -> RemoteEnv:
        return RemoteEnv(self.url, self.token, name)

    def release(self, env: RemoteEnv) -> None:
        env.close()

    def close(self) -> None:
        pass


def build_pool(cfg: Any, work_root: str | None = None):
    """The pool of a :class:`~helpdp.train.config.TrainConfig`."""
    import dataclasses

    if cfg.rollout.server_url:
        return RemotePool(cfg.rollout.server_url, cfg.tasks.worlds, cfg.rollout.server_token_env)
    from collect.awm.env import EnvConfig, EnvPool

    env = EnvConfig()
    env = dataclasses.replace(
        env,
        max_turns=int(cfg.rollout.max_turns),
        terminate_on_format_error=bool(cfg.rollout.terminate_on_format_error),
        expert_enabled=cfg.gate.design == "agent",
        work_root=work_root or None,
    )
    scenarios = list(cfg.tasks.scenarios) if cfg.tasks.scenarios else None
    return EnvPool(worlds_dir(cfg.tasks.worlds), env, scenarios=scenarios)
