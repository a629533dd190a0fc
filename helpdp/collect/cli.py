"""The command line of the collector, ``python -m helpdp.collect out=DIR [KEY=VALUE ...]``
(:mod:`helpdp.collect.collector`; fields: :class:`~helpdp.collect.config.CollectConfig`,
or ``--help``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from helpdp.cliconf import run_app
from helpdp.collect.awm.sandbox import COMMAND_ERRORS
from helpdp.collect.collector import CollectResult, collect
from helpdp.collect.config import CollectConfig, schema_node
from helpdp.collect.policy import evaluation_line
from helpdp.policies import TablePolicy

__all__ = ["HELP", "main", "run_cli"]

HELP = (
    "",
    "Config groups: collect/actor=simulated|openai|hf|vllm, "
    "collect/interventions=oracle|expert_llm|oracle_expert, collect/schedule=paper|quick",
)


def run_cli(cfg: Any) -> CollectResult:
    """What ``python -m helpdp.collect`` does with its composed config."""
    result = collect(cfg)
    if result.skipped:
        print(f"left out {len(result.skipped)} tasks: {'; '.join(result.skipped[:3])}", flush=True)
    print(result.line(), flush=True)
    if cfg.policy:
        episodes = pd.read_parquet(Path(cfg.out) / "episodes.parquet")
        steps = pd.read_parquet(Path(cfg.out) / "steps.parquet", columns=["state_id"])
        print(evaluation_line(TablePolicy.load(cfg.policy), episodes, steps), flush=True)
    return result


def main() -> None:
    """``python -m helpdp.collect``."""
    run_app(
        "helpdp.collect",
        CollectConfig,
        run_cli,
        config_name="collect",
        node=schema_node(),
        usage="python -m helpdp.collect out=DIR [KEY=VALUE ...]",
        extra_help=HELP,
        errors=COMMAND_ERRORS,
    )
