"""The command line of the collector, ``python -m collect out=DIR [KEY=VALUE ...]``
(:mod:`collect.collector`; fields: :class:`~collect.config.CollectConfig`,
or ``--help``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from collect.awm.sandbox import COMMAND_ERRORS
from collect.collector import CollectResult, EpisodesLost, collect
from collect.config import CollectConfig, schema_node
from collect.policy import candidate_rates, evaluation_line, load_help_policy
from collect.shards import OutputBusy, PlanMismatch
from helpdp.cliconf import Usage, run_app
from helpdp.policies import TablePolicy
from helpdp.select import MixturePolicy

__all__ = ["HELP", "main", "run_cli"]

HELP = (
    "",
    "Config groups: collect/actor=simulated|openai|hf|vllm|vllm_cpu|qwen_coder_0_5b, "
    "collect/interventions=oracle|expert_llm|oracle_expert, collect/schedule=paper|quick|candidates",
)


def run_cli(cfg: CollectConfig) -> CollectResult:
    """What ``python -m collect`` does with its composed config."""
    result = collect(cfg)
    for note in result.notes:
        print(note, flush=True)
    if result.skipped:
        print(f"left out {len(result.skipped)} tasks: {'; '.join(result.skipped[:3])}", flush=True)
    print(result.line(), flush=True)
    n_format = (result.summary.get("outcomes") or {}).get("format_error", 0)
    if n_format:  # a share of invalid episodes with no word on why confused users
        print(
            f"  format_error ({n_format}): the actor's reply was neither a well-formed tool call "
            "nor a final answer (a small model breaks the protocol); such an episode ends there, "
            "counts as a failure and is not valid: episodes.parquet's outcome and steps.parquet's "
            "failure say which turn (docs/collect.md, 'Episodes and their outcomes')",
            flush=True,
        )
    if cfg.policy:
        episodes = pd.read_parquet(Path(cfg.out) / "episodes.parquet")
        steps = pd.read_parquet(Path(cfg.out) / "steps.parquet", columns=["state_id"])
        policy = load_help_policy(cfg.policy)
        if isinstance(policy, TablePolicy):
            print(evaluation_line(policy, episodes, steps), flush=True)
        elif isinstance(policy, MixturePolicy) and not isinstance(cfg.policy, str):
            print("the candidates, each on its own episodes (95% intervals):", flush=True)
            for r in candidate_rates(policy, episodes).itertuples():
                print(
                    f"  {r.candidate}: {r.episodes} episodes, SR {r.SR:.3f} "
                    f"[{r.SR_lo:.3f}, {r.SR_hi:.3f}], calls {r.U:.2f} +- {r.U_ci:.2f}",
                    flush=True,
                )
    return result


def main() -> None:
    """``python -m collect``."""
    run_app(
        "collect",
        CollectConfig,
        run_cli,
        config_name="collect",
        node=schema_node(),
        usage=Usage("python -m collect out=DIR [KEY=VALUE ...]", extra=HELP),
        errors=(*COMMAND_ERRORS, PlanMismatch, OutputBusy, EpisodesLost),
    )
