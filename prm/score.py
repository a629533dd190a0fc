"""``python -m prm.score data=DIR prm_dir=PRMDIR``: write ``DIR/scores.parquet``.

One row per observed (state, action) of ``transitions.parquet`` (non-terminal by
the contract): ``state_id int64, action int8, p_success float64`` in [0, 1] and
``source string`` naming the PRM. This is what ``python -m helpdp.search
rule=paper`` reads.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from helpdp import contract, load_dataset
from helpdp.cliconf import as_config, run_app
from prm.config import ScoreConfig
from prm.data import observed_pairs
from prm.load import load_prm

SCORES_SCHEMA = contract.SCORES_SCHEMA  # declared once, in helpdp/contract.py


def score_dataset(
    prm, ds, *, allow_other_actor: bool = False, progress: bool = False
) -> pd.DataFrame:
    """The scores.parquet table of ``ds`` under ``prm``."""
    pairs = observed_pairs(ds)
    p = prm.predict(
        ds,
        pairs["state_id"].to_numpy(),
        pairs["action"].to_numpy(),
        allow_other_actor=allow_other_actor,
        progress=progress,
    )
    if not np.all(np.isfinite(p)):
        raise RuntimeError("the PRM produced a non-finite probability")
    return pd.DataFrame(
        {
            "state_id": pairs["state_id"].to_numpy(np.int64),
            "action": pairs["action"].to_numpy(np.int8),
            "p_success": np.clip(p, 0.0, 1.0).astype(np.float64),
            "source": prm.source,
        }
    )


def write_scores(scores: pd.DataFrame, path) -> Path:
    """Write ``scores`` with the contract's column types (:func:`helpdp.contract.conform`),
    atomically (:func:`helpdp.contract.write_table`: a temporary file renamed into
    place, so a reader never sees half a file)."""
    table = pa.Table.from_pandas(
        scores[list(SCORES_SCHEMA.names)], schema=SCORES_SCHEMA, preserve_index=False
    )
    return contract.write_table(contract.conform("scores", table), path)


def _describe(scores: pd.DataFrame) -> str:
    sources = sorted({str(v) for v in scores["source"].unique()})
    mean = float(scores["p_success"].mean()) if len(scores) else float("nan")
    return f"source {', '.join(sources)}, {len(scores)} rows, mean p_success {mean:.4f}"


def check_replace(out: Path, scores: pd.DataFrame, *, overwrite: bool = False) -> None:
    """Refuse to write ``scores`` over ``out`` unless ``out`` is absent, holds these very
    scores (a rerun), or holds other scores of ``prm.score`` and ``overwrite`` is true.

    A file that is not a scores table of ``prm.score`` (the contract's columns, every
    ``source`` a PRM's) is never replaced, whatever ``overwrite`` says: it is the
    user's, not ours. The refusal leaves ``out`` as it was."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_file():
        raise FileExistsError(
            f"out={out}: exists and is not a regular file; prm.score replaces only a "
            "scores file it wrote (choose another out=)"
        )
    try:
        old = pq.read_table(out).to_pandas()
    except Exception:  # noqa: BLE001 - any unreadable file is not ours
        old = None
    ours = (
        old is not None
        and list(old.columns) == list(SCORES_SCHEMA.names)
        and len(old) > 0
        and all(str(v).startswith("prm:") for v in old["source"].unique())
    )
    if not ours:
        raise FileExistsError(
            f"out={out}: exists and is not a scores table written by prm.score; "
            "it was left as it is (choose another out=)"
        )
    new = scores[list(SCORES_SCHEMA.names)].reset_index(drop=True)
    same = len(old) == len(new) and all(
        np.array_equal(old[c].to_numpy(), new[c].to_numpy()) for c in SCORES_SCHEMA.names
    )
    if not same and not overwrite:
        raise FileExistsError(
            f"out={out}: holds other scores ({_describe(old)}; these: {_describe(new)}); "
            "left as they are: overwrite=true replaces them, out=OTHER.parquet keeps both"
        )


def score(cfg) -> dict:
    """Score ``cfg.data`` with the PRM in ``cfg.prm_dir``; write and re-validate the
    scores; returns a summary (printed, JSON on the last line)."""

    cfg = as_config(ScoreConfig, cfg)
    ds = load_dataset(cfg.data)
    prm = load_prm(cfg.prm_dir, device=cfg.device)
    scores = score_dataset(prm, ds, allow_other_actor=cfg.allow_other_actor, progress=cfg.progress)
    out = Path(cfg.out) if cfg.out else Path(cfg.data) / "scores.parquet"
    check_replace(out, scores, overwrite=cfg.overwrite)
    write_scores(scores, out)
    if out.resolve() == (Path(cfg.data) / "scores.parquet").resolve():
        load_dataset(cfg.data)  # the contract's own check of what was just written
    p = scores["p_success"].to_numpy()
    summary = {
        "out": str(out),
        "rows": len(scores),
        "source": prm.source,
        "p_mean": {
            str(a): float(p[scores["action"] == a].mean())
            for a in sorted(scores["action"].unique())
        },
    }
    print(f"wrote {len(scores)} scores ({prm.source}) -> {out}")
    print(json.dumps(summary))
    return summary


def main() -> None:
    """Command line: ``key=value`` overrides of conf/prm_score.yaml (fields: --help)."""
    run_app("prm.score", ScoreConfig, score, config_name="prm_score", out_dir=False)


if __name__ == "__main__":
    sys.exit(main())
