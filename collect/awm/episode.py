"""An episode's record: what ``reset`` and ``step`` return, and what an episode keeps.

:class:`ResetResult` and :class:`StepResult` are the answers of the episode API.
:class:`EpisodeRecord` (a part of :class:`~collect.awm.env.AWMEnv`) keeps the
episode's counters and trajectory, ends an episode with its verification and reward,
and reports its state. :func:`trajectory_text` renders a trajectory as the expert (and
the SQL-mode judge) reads it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

from collect.awm.observation import render_observation
from collect.awm.rewards import episode_reward
from collect.awm.verification import Verification
from helpdp.jsonvalue import JSON

if TYPE_CHECKING:
    from collect.awm.dataset import Scenario

__all__ = ["EpisodeRecord", "ResetResult", "StepResult", "trajectory_text"]


@dataclass
class ResetResult:
    """The start of an episode."""

    episode_id: str
    scenario: str
    task_idx: int
    task: str
    system_prompt: str

    @property
    def messages(self) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": render_observation(self.task)},
        ]

    def as_dict(self) -> dict[str, JSON]:
        return {**asdict(self), "messages": self.messages}


@dataclass
class StepResult:
    """One turn's effect. ``reward`` is set when ``done``."""

    observation: str
    reward: float | None
    done: bool
    info: dict[str, JSON]

    def as_dict(self) -> dict[str, JSON]:
        return asdict(self)


class Episode(Protocol):
    """What :func:`episode_state` and :func:`end_info` read of an episode, in either
    runtime (:class:`EpisodeRecord`'s, and ``collect.awm.remote_env.OpenEnvAWMEnv``)."""

    episode_id: str
    scenario: Scenario
    task_idx: int
    turn: int
    done: bool
    outcome: str | None
    format_errors: int
    failures: Mapping[str, int]
    tool_calls: int
    expert_calls: int


def episode_state(ep: Episode) -> dict[str, JSON]:
    """An episode's ``state()`` as both runtimes report it (the local one adds its
    worker restarts and verifier violations)."""
    return {
        "episode_id": ep.episode_id or None,
        "step_count": ep.turn,
        "scenario": ep.scenario.name,
        "task_idx": ep.task_idx,
        "done": ep.done,
        "outcome": ep.outcome,
        "format_errors": ep.format_errors,
        "failures": dict(ep.failures),
        "tool_calls": ep.tool_calls,
        "expert_calls": ep.expert_calls,
    }


def end_info(ep: Episode, v: Verification, verification: dict[str, JSON]) -> dict[str, JSON]:
    """What both runtimes add to the ``info`` of an episode's last step: the outcome, the
    ``verification`` record (the local runtime's whole :class:`Verification`, the remote
    one's mode, status and message) and the episode's counts."""
    return {
        "outcome": v.outcome,
        "valid": v.valid,
        "verification": verification,
        "format_errors": ep.format_errors,
        "failures": dict(ep.failures),
        "turns": ep.turn,
        "tool_calls": ep.tool_calls,
        "expert_calls": ep.expert_calls,
        "episode_id": ep.episode_id,
        "scenario": ep.scenario.name,
        "task_idx": ep.task_idx,
    }


def trajectory_text(trajectory: list[dict[str, JSON]], final_answer: str | None = None) -> str:
    """An episode's actions and observations as the expert reads them (world output
    rendered as data, :func:`collect.awm.observation.render_observation`)."""
    lines = []
    for entry in trajectory:
        action = entry["action"]
        if action["kind"] == "call_tool":
            lines.append(
                f"[{entry['turn']}] call {action['tool_name']} {json.dumps(action['arguments'], default=str)}"
            )
        elif action["kind"] == "final":
            continue
        else:
            lines.append(
                f"[{entry['turn']}] {action['kind']} {action.get('message') or ''}".rstrip()
            )
        if entry["observation"]:
            obs = entry["observation"]
            if action["kind"] in ("call_tool", "list_tools"):  # the world's: as data
                obs = render_observation(obs)
            lines.append(f"  -> {obs[:1500]}")
    if final_answer:
        lines.append(f"[final answer] {final_answer}")
    return "\n".join(lines)


def truncation_info(turn: int) -> dict[str, JSON]:
    """The ``info`` of an episode ended before the actor's next turn because its prompt no
    longer fits the model's context window (``truncate`` of either runtime)."""
    return {
        "turn": turn,
        "action": {"kind": "context_full"},
        "failure": None,
        "format_error": False,
        "truncated": True,
        "context_full": True,
    }


class EpisodeRecord:
    """The bookkeeping of an :class:`~collect.awm.env.AWMEnv`'s episode (part of the
    environment)."""

    def _new_episode_state(self) -> None:
        self.episode_id = ""
        self.task_idx = -1
        self.task_text = ""
        self.turn = 0
        self.done = False
        self.failures: Counter[str] = Counter()
        self.format_errors = 0
        self.expert_calls = 0
        self.tool_calls = 0
        self.trajectory: list[dict[str, JSON]] = []
        self.outcome: str | None = None
        self.last_verification: Verification | None = None
        self.verify_seconds = 0.0  # spent by this episode's verifier runs
        self.tool_seconds = 0.0  # spent by this episode's tool calls

    def _end(self, verification: Verification, observation: str, info: dict) -> StepResult:
        self.done = True
        self.outcome = verification.outcome
        self.last_verification = verification
        reward = episode_reward(verification.outcome, self.config.rewards)
        info.update(end_info(self, verification, asdict(verification)))
        return StepResult(observation, reward, True, info)

    def trajectory_text(self, final_answer: str | None = None) -> str:
        return trajectory_text(self.trajectory, final_answer)

    def state(self) -> dict[str, JSON]:
        return {
            **episode_state(self),
            "worker_restarts": self.restarts,
            "verifier_protocol_violations": self.verifier_pool.protocol_violations,
        }
