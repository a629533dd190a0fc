"""Small datasets written from explicit episodes, for tests and benchmarks.

``write_episodes`` turns a list of episodes (state names and actions) into a
dataset directory with the contract's tables plus ``episodes.parquet`` and
``steps.parquet``. ``separable_dataset`` writes a text task where the state text
says whether the episode will succeed, so a PRM that reads text can separate
success from failure on tasks it never saw while a tabular PRM cannot.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from helpdp.contract import build_manifest
from helpdp.data import write_dataset


def write_episodes(
    path,
    states: dict,
    episodes: list,
    *,
    actions=("nohelp", "expert"),
    actor: str | None = "toy-actor",
    gamma: float = 1.0,
    overwrite: bool = False,
) -> Path:
    """Write a dataset directory (:func:`helpdp.data.write_dataset`: atomic,
    checked by the loader; a non-empty ``path`` is refused unless ``overwrite``).

    ``states``: name -> dict(task_id, depth, text, terminal=False, success=False).
    ``episodes``: list of dict(task_id, split, path) with ``path`` alternating
    state names and actions: ``[s0, a0, s1, a1, ..., sT]`` (``sT`` terminal).
    State ids are the positions in ``states`` (insertion order).
    """
    ids = {name: i for i, name in enumerate(states)}
    st = pd.DataFrame(
        {
            "state_id": np.arange(len(states), dtype=np.int64),
            "task_id": [s["task_id"] for s in states.values()],
            "depth": np.array([s["depth"] for s in states.values()], np.int32),
            "is_start": np.array([s["depth"] == 0 for s in states.values()], bool),
            "terminal": np.array([s.get("terminal", False) for s in states.values()], bool),
            "success": np.array([s.get("success", False) for s in states.values()], bool),
            "text": [s.get("text", "") for s in states.values()],
        }
    )
    counts: dict[tuple, int] = {}
    steps, eps = [], []
    for e, ep in enumerate(episodes):
        p = ep["path"]
        for t in range(0, len(p) - 1, 2):
            key = (ids[p[t]], int(p[t + 1]), ids[p[t + 2]])
            counts[key] = counts.get(key, 0) + 1
            steps.append((e, t // 2, *key))
        last = states[p[-1]]
        succ = bool(last.get("success", False))
        eps.append(
            (
                e,
                ep["task_id"],
                ep.get("split", "train"),
                0,
                0.5,
                len(p) // 2,
                succ,
                float(succ),
                0,
                0,
            )
        )
    k = np.array(list(counts), dtype=np.int64).reshape(-1, 3)
    tr = pd.DataFrame(
        {
            "state_id": k[:, 0],
            "action": k[:, 1].astype(np.int8),
            "next_state_id": k[:, 2],
            "count": np.array(list(counts.values()), np.int64),
        }
    )
    ep_df = pd.DataFrame(
        eps,
        columns=[
            "episode_id",
            "task_id",
            "split",
            "seed",
            "trigger_p",
            "steps",
            "success",
            "reward",
            "expert_calls",
            "format_errors",
        ],
    ).astype(
        {
            "episode_id": "int64",
            "seed": "int64",
            "steps": "int32",
            "expert_calls": "int32",
            "format_errors": "int32",
        }
    )
    steps_df = pd.DataFrame(
        steps, columns=["episode_id", "t", "state_id", "action", "next_state_id"]
    ).astype(
        {
            "episode_id": "int64",
            "t": "int32",
            "state_id": "int64",
            "action": "int8",
            "next_state_id": "int64",
        }
    )
    manifest = build_manifest(actions, gamma=gamma, source={"actor": actor, "generator": "toy_prm"})
    tables = {"states": st, "transitions": tr, "episodes": ep_df, "steps": steps_df}
    return write_dataset(path, manifest, tables, overwrite=overwrite)


_FILLER = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def separable_dataset(
    path, *, n_tasks: int = 60, episodes_per_task: int = 4, seed: int = 0, actor="toy-actor"
) -> Path:
    """Tasks of two steps whose every non-terminal state text contains ``lamp
    green`` (the episode will succeed) or ``lamp red`` (it will fail), plus random
    filler words. Splits 60/20/20 by task. Each episode takes nohelp or help at
    random; the outcome depends on the lamp only."""
    rng = np.random.default_rng(seed)
    states, episodes = {}, []
    order = rng.permutation(n_tasks)
    split_of = {}
    for rank, t in enumerate(order):
        split_of[t] = (
            "train" if rank < 0.6 * n_tasks else ("validation" if rank < 0.8 * n_tasks else "test")
        )
    for t in range(n_tasks):
        task = f"task_{t:03d}"
        green = bool(rng.random() < 0.5)
        lamp = "lamp green" if green else "lamp red"
        words = rng.choice(_FILLER, size=4)
        states[f"{task}/s0"] = {
            "task_id": task,
            "depth": 0,
            "text": f"{task} start {' '.join(words[:2])} {lamp}",
        }
        for a in (0, 1):
            states[f"{task}/s1_{a}"] = {
                "task_id": task,
                "depth": 1,
                "text": f"{task} step {' '.join(words[2:])} {lamp} after {a}",
            }
        states[f"{task}/end"] = {
            "task_id": task,
            "depth": 2,
            "terminal": True,
            "success": green,
            "text": "done",
        }
        for _ in range(episodes_per_task):
            a0, a1 = (int(x) for x in rng.integers(0, 2, 2))
            episodes.append(
                {
                    "task_id": task,
                    "split": split_of[t],
                    "path": [f"{task}/s0", a0, f"{task}/s1_{a0}", a1, f"{task}/end"],
                }
            )
    return write_episodes(path, states, episodes, actor=actor)
