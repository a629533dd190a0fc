"""Rewards, in one place: what an AWM episode is worth.

* The environment's step reward (:class:`RewardConfig`, :func:`episode_reward`): one
  value per verifier outcome, returned by the final ``step`` of an episode
  (``collect.awm.env``, the remote and OpenEnv environments).
* GRPO's reward callables for TRL (:class:`GRPORewardConfig`, :func:`build_rewards`):
  ``(prompts, completions, **kwargs) -> list[float | None]``. The rollout function
  (:class:`helpdp.train.rollout.AWMRollout`) returns one entry per episode in each of
  these extra keys, which GRPOTrainer hands to every reward function: ``outcome`` (the
  verifier's: complete / incomplete / others / format_error / server_error ...),
  ``end_reason``, ``valid``, ``blind_calls`` (expert calls before any failed turn),
  ``recovery_calls`` (after one), ``format_errors`` and ``turns``. An episode that a dead
  worker or a failing endpoint ended (``valid`` false, outcome ``server_error``) gets
  ``None``: TRL leaves it out of its group's baseline and gives it no advantage, so one
  broken episode never poisons the batch. The classes are plain and picklable
  (parameters are attributes).

Pure: no I/O, no torch (the AWM runtime and the trainer both import it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from helpdp.cliconf import doc_field as _f
from helpdp.jsonvalue import JSON

__all__ = [
    "OPENENV_OUTCOMES",
    "REWARD_CONVENTIONS",
    "FormatReward",
    "GRPORewardConfig",
    "GraduatedReward",
    "RewardConfig",
    "VerifierReward",
    "build_rewards",
    "episode_reward",
    "verdict_reward",
]


@dataclass
class RewardConfig:
    """Episode rewards by outcome (AWM's defaults)."""

    complete: float = field(default=1.0, metadata={"help": "task verified complete"})
    incomplete: float = field(
        default=0.1, metadata={"help": "partially done (SQL-mode judge says incomplete)"}
    )
    format_error: float = field(
        default=-1.0, metadata={"help": "the episode ended on a format error (AWM: -1)"}
    )
    others: float = field(
        default=0.0, metadata={"help": "anything else (not done, wrong, no answer)"}
    )
    server_error: float = field(
        default=0.0, metadata={"help": "the environment failed (episode is not the agent's fault)"}
    )


def episode_reward(outcome: str, config: RewardConfig | None = None) -> float:
    """Reward of an episode outcome: complete/incomplete/format_error/server_error/others."""
    cfg = config or RewardConfig()
    return {
        "complete": cfg.complete,
        "incomplete": cfg.incomplete,
        "format_error": cfg.format_error,
        "server_error": cfg.server_error,
    }.get(outcome, cfg.others)


#: how the OpenEnv-mode server (``collect.awm.openenv_server``, ``reward_convention``)
#: names and rewards a verdict: helpdp's (the outcome and :func:`episode_reward`) or
#: OpenEnv AWM's own (``envs/agent_world_model_env``), docs/openenv.md
REWARD_CONVENTIONS = ("helpdp", "openenv")
#: helpdp's outcomes under OpenEnv AWM's reward-type names: a verifier that gave no
#: verdict (raised, timed out, no judge) is OpenEnv's ``judge_error``
OPENENV_OUTCOMES = {"verifier_error": "judge_error"}


def verdict_reward(
    outcome: str, config: RewardConfig | None = None, convention: str = "helpdp"
) -> tuple[str, float]:
    """``(reward_type, reward)`` of a verified episode outcome. ``helpdp``: the outcome
    and :func:`episode_reward`. ``openenv``: OpenEnv AWM's, whose reward config holds
    only complete, incomplete and format_error and gives every other type 0.0, and whose
    name for a verifier without a verdict is ``judge_error``:

    >>> verdict_reward("verifier_error", RewardConfig(others=0.5), "openenv")
    ('judge_error', 0.0)
    >>> verdict_reward("verifier_error", RewardConfig(others=0.5))
    ('verifier_error', 0.5)
    """
    cfg = config or RewardConfig()
    if convention == "helpdp":
        return outcome, episode_reward(outcome, cfg)
    if convention != "openenv":
        raise ValueError(
            f"reward_convention must be one of {REWARD_CONVENTIONS}, got {convention!r}"
        )
    value = {"complete": cfg.complete, "incomplete": cfg.incomplete}.get(outcome, 0.0)
    if outcome == "format_error":
        value = cfg.format_error
    return OPENENV_OUTCOMES.get(outcome, outcome), value


# ---------------------------------------------------------------------------
# GRPO (TRL reward functions)
# ---------------------------------------------------------------------------


@dataclass
class GRPORewardConfig:
    """The reward callables handed to GRPOTrainer and their values."""

    kind: str = _f(
        "graduated", "graduated: the reference recipe's hierarchy; verifier: 1 / 0.1 / -1"
    )
    solo: float = _f(2.0, "graduated: complete without the expert")
    recovery: float = _f(1.3, "graduated: complete, the expert called after an error")
    blind: float = _f(0.8, "graduated: complete, the expert called before any error")
    complete: float = _f(1.0, "verifier: complete")
    incomplete: float = _f(0.1, "incomplete (both)")
    format_error: float = _f(-1.0, "the episode ended on a format error (both)")
    format_weight: float = _f(
        0.5, "weight of the separate format reward (share of well-formed turns); 0: off"
    )


def _rows(n: int, kwargs: dict[str, JSON]) -> list[dict[str, JSON]]:
    keys = ("outcome", "end_reason", "valid", "blind_calls", "recovery_calls")
    keys += ("format_errors", "turns")
    return [{k: kwargs[k][i] for k in keys if k in kwargs} for i in range(n)]


def _format_ended(row: dict[str, JSON]) -> bool:
    return row.get("outcome") == "format_error" or row.get("end_reason") == "format_error"


def _broken(row: dict[str, JSON]) -> bool:
    return row.get("outcome") == "server_error" or (
        "valid" in row and not row["valid"] and not _format_ended(row)
    )


def _episode_rewards(n: int, kwargs: dict[str, JSON], format_error: float, ended) -> list:
    """Per episode: ``format_error`` when a format error ended it, None when the
    infrastructure broke it (left out of the group baseline), else ``ended(row)``."""
    out: list[float | None] = []
    for row in _rows(n, kwargs):
        if _format_ended(row):
            out.append(format_error)
        else:
            out.append(None if _broken(row) else ended(row))
    return out


@dataclass
class VerifierReward:
    """The verifier's reward: complete 1.0, incomplete 0.1, format error -1.0.

    >>> r = VerifierReward()
    >>> r(["p"] * 4, ["c"] * 4, outcome=["complete", "incomplete", "format_error", "server_error"],
    ...   valid=[True, True, False, False])
    [1.0, 0.1, -1.0, None]
    """

    complete: float = 1.0
    incomplete: float = 0.1
    format_error: float = -1.0
    __name__ = "verifier"  # the name TRL logs the reward under

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs) -> list[float | None]:
        return _episode_rewards(len(completions), kwargs, self.format_error, self._ended)

    def _ended(self, row: dict[str, JSON]) -> float:
        return self.complete if row.get("outcome") == "complete" else self.incomplete


@dataclass
class GraduatedReward:
    """The seed's hierarchy: solo completion 2.0 > recovery with the expert after an
    error 1.3 > blind expert call before any attempt 0.8 > incomplete 0.1 > format
    error -1.0. A completed episode with both kinds of call counts as a recovery.

    >>> r = GraduatedReward()
    >>> r([""] * 5, [""] * 5,
    ...   outcome=["complete", "complete", "complete", "incomplete", "format_error"],
    ...   blind_calls=[0, 0, 1, 2, 0], recovery_calls=[0, 1, 0, 0, 0],
    ...   valid=[True, True, True, True, False])
    [2.0, 1.3, 0.8, 0.1, -1.0]
    """

    solo: float = 2.0
    recovery: float = 1.3
    blind: float = 0.8
    incomplete: float = 0.1
    format_error: float = -1.0
    __name__ = "graduated"  # the name TRL logs the reward under

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs) -> list[float | None]:
        return _episode_rewards(len(completions), kwargs, self.format_error, self._ended)

    def _ended(self, row: dict[str, JSON]) -> float:
        if row.get("outcome") != "complete":
            return self.incomplete
        if int(row.get("recovery_calls", 0)) > 0:
            return self.recovery
        return self.blind if int(row.get("blind_calls", 0)) > 0 else self.solo


@dataclass
class FormatReward:
    """The share of an episode's turns that were well-formed (no format error).

    >>> FormatReward()([""] * 3, [""] * 3, format_errors=[0, 1, 4], turns=[3, 4, 4],
    ...                outcome=["complete", "incomplete", "server_error"])
    [1.0, 0.75, None]
    """

    __name__ = "format"  # the name TRL logs the reward under

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs) -> list[float | None]:
        out: list[float | None] = []
        for row in _rows(len(completions), kwargs):
            turns = int(row.get("turns", 0))
            if row.get("outcome") == "server_error" or turns == 0:
                out.append(None)
            else:
                out.append(1.0 - int(row.get("format_errors", 0)) / turns)
        return out


#: a GRPO reward function: ``(prompts, completions, **columns) -> one reward (or None) each``
RewardFunc = Callable[..., list[float | None]]


def build_rewards(cfg: GRPORewardConfig) -> tuple[list[RewardFunc], list[float]]:
    """The reward callables of ``cfg`` and their weights."""
    if cfg.kind == "graduated":
        main: GraduatedReward | VerifierReward = GraduatedReward(
            cfg.solo, cfg.recovery, cfg.blind, cfg.incomplete, cfg.format_error
        )
    elif cfg.kind == "verifier":
        main = VerifierReward(cfg.complete, cfg.incomplete, cfg.format_error)
    else:
        raise ValueError(f"rewards.kind must be graduated or verifier, got {cfg.kind!r}")
    funcs, weights = [main], [1.0]
    if cfg.format_weight:
        funcs.append(FormatReward())
        weights.append(float(cfg.format_weight))
    return funcs, weights
