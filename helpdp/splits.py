"""Task splits and stable hashes: which task is train, validation or test, decided once.

Splits are by task, so no task leaks between train, validation and test: the
episodes' own ``split`` column when the dataset has one (the collector writes it),
else a deterministic hash of ``task_id`` (``hash_split``). ``stable_int64`` is the
hash every seeded draw of the collection and of the cross-fitting folds derives from.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd

SPLITS = ("train", "validation", "test")


def _digest(*parts: object) -> bytes:
    payload = json.dumps(parts, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).digest()


def stable_int64(*parts: object) -> int:
    """First 8 bytes of sha256(canonical JSON of ``parts``) as a signed int64."""
    return int.from_bytes(_digest(*parts)[:8], "big", signed=True)


def hash_split(task_id: str, *, val_fraction: float, test_fraction: float, seed: int = 0) -> str:
    """Deterministic split of one task: a uniform number from sha256(seed, task_id)."""
    if not (0 <= val_fraction and 0 <= test_fraction and val_fraction + test_fraction < 1):
        raise ValueError(
            f"val_fraction and test_fraction must be >= 0 with a sum < 1, got {val_fraction}, {test_fraction}"
        )
    digest = hashlib.sha256(f"{seed}\0{task_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0**64
    if u < test_fraction:
        return "test"
    if u < test_fraction + val_fraction:
        return "validation"
    return "train"


def task_splits(
    ds, *, val_fraction: float = 0.2, test_fraction: float = 0.2, seed: int = 0
) -> pd.Series:
    """``task_id -> split`` for every task of the dataset.

    Uses ``episodes.parquet``'s ``split`` column when present (a task found in two
    splits is refused); tasks it does not cover, or all tasks when there is no such
    column, are split by ``hash_split``.
    """
    tasks = pd.unique(ds.states["task_id"].astype(str))
    out: dict[str, str] = {}
    ep = ds.episodes
    if ep is not None and {"task_id", "split"} <= set(ep.columns):
        pairs = ep[["task_id", "split"]].astype(str).drop_duplicates()
        bad = ~pairs["split"].isin(SPLITS)
        if bad.any():
            raise ValueError(
                f"episodes.parquet: column 'split': value {pairs['split'][bad].iloc[0]!r} "
                f"is not one of {SPLITS}"
            )
        multi = pairs["task_id"].duplicated(keep=False)
        if multi.any():
            t = pairs["task_id"][multi].iloc[0]
            found = sorted(pairs["split"][pairs["task_id"] == t])
            raise ValueError(
                f"episodes.parquet: task {t!r} appears in several splits {found}: tasks would leak"
            )
        out.update(zip(pairs["task_id"], pairs["split"], strict=True))
    for t in tasks:
        if t not in out:
            out[t] = hash_split(
                t, val_fraction=val_fraction, test_fraction=test_fraction, seed=seed
            )
    return pd.Series(out, name="split").reindex(tasks)
