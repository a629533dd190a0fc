"""The rollout's state across ranks and checkpoints.

* :class:`GlobalSplitSchedule`: the adaptive split of :class:`~helpdp.train.gate.SplitSchedule`
  computed over every rank's episodes: under ``accelerate launch --num_processes N`` each
  rank runs its own rollout batch, and each rank's ``observe`` gathers the format errors
  of all ranks (in rank order) before recording them, so every rank sees the same rate,
  phase and transitions, as one trainer over the whole global batch would.
* :func:`rollout_state` / :func:`restore_rollout_state`: what a checkpoint must hold so
  that a resumed run continues the rollout (its batch counter, the episode counter that
  seeds the episodes, the split's recent episodes and transitions). The file keeps the
  split under its key of before the rename, ``schedule`` (``bench/rehearsal.py`` reads
  it); a state that names it ``split`` loads too.
* :class:`RolloutStateCallback`: writes that state into each ``checkpoint-N`` directory,
  one file per rank (``rollout_state-rank{R}.json``).
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from helpdp.jsonvalue import JSON
from helpdp.train.gate import SplitSchedule

if TYPE_CHECKING:
    from helpdp.train.rollout import AWMRollout

__all__ = [
    "GlobalSplitSchedule",
    "RolloutStateCallback",
    "dist_rank",
    "restore_rollout_state",
    "rollout_state",
    "state_file",
]


def dist_rank() -> tuple[int, int]:
    """``(rank, world size)`` of this process: ``RANK``/``WORLD_SIZE`` as set by
    ``accelerate launch`` (torch.distributed.run); ``(0, 1)`` outside a launch."""
    return int(os.environ.get("RANK", "0") or 0), int(os.environ.get("WORLD_SIZE", "1") or 1)


def _gather(values: list[bool]) -> list[bool]:
    """``values`` of every rank, concatenated in rank order (this rank's alone when
    torch.distributed is not initialised or has one process)."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch is the train extra
        return list(values)
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return list(values)
    parts: list[list[bool] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, [bool(v) for v in values])
    return [v for part in parts for v in part]


class GlobalSplitSchedule(SplitSchedule):
    """A :class:`SplitSchedule` whose ``observe`` records every rank's episodes.

    Every rank calls ``observe`` once per rollout batch (GRPO steps are in lock step),
    so the gather is a collective that cannot deadlock. Alone, it is the plain split.

    >>> s = GlobalSplitSchedule(kind="adaptive", window=4)
    >>> s.observe([True, False, False, False]); s.n_expert(8), s.phase
    (2, 'solo_heavy')
    """

    def observe(self, format_errors) -> None:
        super().observe(_gather(list(format_errors)))


def rollout_state(rollout: AWMRollout) -> dict[str, JSON]:
    """What a resumed rollout needs (JSON-able)."""
    s = rollout.split
    return {
        "step": int(rollout.step),
        "episodes": int(rollout.episodes),
        "schedule": {  # the split (its key in the files written so far)
            "step": int(s.step),
            "recent": [bool(x) for x in s.recent],
            "transitions": [list(t) for t in s.transitions],
        },
    }


def restore_rollout_state(rollout: AWMRollout, state: dict[str, JSON]) -> None:
    """Set ``rollout``'s counters and split to ``state`` (of :func:`rollout_state`)."""
    rollout.step = int(state["step"])
    rollout.episodes = int(state["episodes"])
    s, saved = rollout.split, state["split" if "split" in state else "schedule"]
    s.step = int(saved["step"])
    s.recent = deque(bool(x) for x in saved["recent"])
    s.transitions = [(int(a), str(b), str(c), float(d)) for a, b, c, d in saved["transitions"]]


def state_file(checkpoint: str | Path, rank: int) -> Path:
    return Path(checkpoint) / f"rollout_state-rank{rank}.json"


class RolloutStateCallback:
    """A ``transformers`` callback: at every checkpoint, this rank's rollout state
    into ``<output_dir>/checkpoint-<step>/rollout_state-rank<R>.json``."""

    def __init__(self, rollout: AWMRollout, rank: int):
        self.rollout, self.rank = rollout, int(rank)

    def __getattr__(self, name):
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)

    def on_save(self, args, state, control, **kw):
        path = state_file(Path(args.output_dir) / f"checkpoint-{state.global_step}", self.rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rollout_state(self.rollout)) + "\n")
        tmp.replace(path)
