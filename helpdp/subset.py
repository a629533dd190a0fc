"""Sub-datasets: the tasks of some splits, or the episodes of one half of the data.

Both rebuild a validated ``Dataset`` with ``helpdp.from_frames``, so every rule
of the contract still holds and the DP runs on them unchanged. Tasks are
disconnected components of the state graph (a state belongs to one task), so a
policy solved at help cost r on the whole dataset takes, on the states of a task
subset, exactly the actions it takes when solved at r on that subset alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from helpdp.data import Dataset, from_frames


def task_subset(ds: Dataset, tasks) -> Dataset:
    """The states, transitions, scores, episodes and steps of ``tasks`` only."""
    tasks = set(map(str, tasks))
    keep = ds.states["task_id"].astype(str).isin(tasks).to_numpy()
    if not keep.any():
        raise ValueError(f"{ds.path}: no state belongs to the tasks {sorted(tasks)[:5]}")
    states = ds.states[keep].reset_index(drop=True)
    ids = states["state_id"].to_numpy(np.int64)
    tr = ds.transitions[np.isin(ds.transitions["state_id"].to_numpy(np.int64), ids)]
    scores = None
    if ds.scores is not None:
        scores = ds.scores[np.isin(ds.scores["state_id"].to_numpy(np.int64), ids)]
        scores = scores.reset_index(drop=True)
    episodes = steps = None
    if ds.episodes is not None and "task_id" in ds.episodes.columns:
        episodes = ds.episodes[ds.episodes["task_id"].astype(str).isin(tasks)]
        episodes = episodes.reset_index(drop=True)
    if ds.steps is not None:
        steps = ds.steps[np.isin(ds.steps["state_id"].to_numpy(np.int64), ids)]
        steps = steps.reset_index(drop=True)
    return from_frames(
        ds.manifest,
        states,
        tr.reset_index(drop=True),
        scores,
        path=ds.path,
        episodes=episodes,
        steps=steps,
    )


def episode_subset(ds: Dataset, episode_ids) -> Dataset:
    """The count model of the episodes ``episode_ids`` alone, rebuilt from
    ``steps.parquet`` (every state is kept; states those episodes never visited
    have no transitions and start weight 0). Scores are not carried over."""
    if ds.steps is None:
        raise ValueError(f"{ds.path}: this needs steps.parquet (the episodes behind the counts)")
    st = ds.steps[ds.steps["episode_id"].isin(np.asarray(episode_ids))]
    if st.empty:
        raise ValueError(f"{ds.path}: no step belongs to the selected episodes")
    g = (
        st.groupby(["state_id", "action", "next_state_id"], sort=True)
        .size()
        .rename("count")
        .reset_index()
    )
    tr = pd.DataFrame(
        {
            "state_id": g["state_id"].to_numpy(np.int64),
            "action": g["action"].to_numpy(np.int8),
            "next_state_id": g["next_state_id"].to_numpy(np.int64),
            "count": g["count"].to_numpy(np.int64),
        }
    )
    episodes = None
    if ds.episodes is not None and "episode_id" in ds.episodes.columns:
        episodes = ds.episodes[ds.episodes["episode_id"].isin(np.asarray(episode_ids))]
        episodes = episodes.reset_index(drop=True)
    return from_frames(
        ds.manifest,
        ds.states,
        tr,
        None,
        path=ds.path,
        episodes=episodes,
        steps=st.reset_index(drop=True),
    )
