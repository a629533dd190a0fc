"""What the episode loop (:mod:`collect.rollout`), actors and interventions exchange.

* :class:`TurnRequest` -> an :class:`Actor` -> :class:`TurnReply`: one generation per
  live episode of a lock-step round (``generate`` gets the whole batch).
* :class:`EpisodeView` -> an :class:`Intervention` -> :class:`Help`: the message put
  into the actor's context at a step where help is triggered.
* A help policy (:class:`helpdp.policies.HelpPolicy`, re-exported here) decides that
  step instead of the random schedule when a policy is evaluated.

:class:`Actor` and :class:`Intervention` are structural (``typing.Protocol``): any
object with these members works; :mod:`collect.actors` and
:mod:`collect.interventions` hold the shipped kinds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from collect.schedule import EpisodeSpec
from helpdp.jsonvalue import JSON
from helpdp.policies import HelpPolicy

if TYPE_CHECKING:
    import numpy as np

    from collect.awm.dataset import Scenario, Solution
    from collect.awm.env import AWMEnv

__all__ = [
    "Actor",
    "EpisodeView",
    "Help",
    "HelpPolicy",
    "Intervention",
    "Pool",
    "Turn",
    "TurnReply",
    "TurnRequest",
]


@dataclass
class Help:
    """What an intervention gives: ``text`` goes into the actor's context.

    ``call``/``final``: the oracle's structured advice (next call, or "answer now"),
    read only by the simulated actor.
    """

    name: str
    kind: str
    text: str
    call: dict[str, JSON] | None = None
    final: bool = False
    tokens: int = 0


@dataclass
class Turn:
    """One past turn as the actor experienced it."""

    t: int
    action: int
    help: Help | None
    text: str
    parsed: dict[str, JSON]
    failure: str | None
    observation: str


@dataclass
class EpisodeView:
    """Structured facts about an episode; the simulated actor and the oracle read them."""

    spec: EpisodeSpec
    task: str
    tools: list[str]
    solution: Solution | None
    history: list[Turn]
    help: Help | None = None

    @property
    def turn(self) -> int:
        return len(self.history)


@dataclass
class TurnRequest:
    """One generation: the chat ``messages``, a sampling ``seed`` and the episode's view."""

    messages: list[dict[str, str]]
    seed: int
    view: EpisodeView


@dataclass
class TurnReply:
    """The actor's turn text; ``error`` when the actor could not produce one.
    ``context_full``: it could not because the prompt does not fit the model's context
    window (``error`` says so): the agent's own end, not a failure of its runtime, so the
    episode is truncated there and its world verified, as at ``env.max_turns``."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    context_full: bool = False


@runtime_checkable
class Actor(Protocol):
    """The agent being taught: one turn of text per request.

    ``name`` is recorded as the manifest's ``source.actor`` (a PRM refuses data of
    another actor); ``needs_solutions``: it reads the tasks' reference solutions (only
    tasks with one are scheduled).
    """

    name: str
    needs_solutions: bool

    def generate(self, requests: Sequence[TurnRequest]) -> list[TurnReply]:
        """One reply per request, in order (a failed one carries ``error``)."""
        ...

    def close(self) -> None:
        """Release the model or its connections."""
        ...


@runtime_checkable
class Intervention(Protocol):
    """What "help" does: intervention k is action k of the collected MDP.

    ``name`` is its entry in the manifest's ``actions``; ``kind`` its implementation.
    """

    name: str
    kind: str
    needs_solutions: bool

    def available(self, calls_so_far: int) -> bool:
        """Whether it may be called again in an episode that called it ``calls_so_far``
        times (else the step takes nohelp)."""
        ...

    def help(self, view: EpisodeView, env: AWMEnv, rng: np.random.Generator) -> Help:
        """The help at the view's state (``env``: the episode's environment)."""
        ...

    def close(self) -> None:
        """Release clients (HTTP connections)."""
        ...


class Pool(Protocol):
    """A runtime of environments, :class:`collect.awm.env.EnvPool`'s interface (the local
    pool, ``collect.awm.remote_env.OpenEnvPool``, ``helpdp.train.envs.RemotePool``): each environment it
    hands out has the episode API of :class:`~collect.awm.env.AWMEnv`."""

    def scenario(self, name: str) -> Scenario:
        """The scenario ``name`` (its tasks and tools)."""
        ...

    def acquire(self, name: str) -> AWMEnv:
        """An environment of scenario ``name``, this caller's until released."""
        ...

    def release(self, env: AWMEnv) -> None:
        """Give ``env`` back (the pool may reuse it)."""
        ...
