"""Every help policy in the environments, on held-out tasks, with paired intervals.

``python -m helpdp.evaluate`` runs the harness (:mod:`helpdp.evaluate.harness`);
``python -m helpdp.evaluate.calibrate`` picks a helper's threshold per budget by
running it in the environments (:mod:`helpdp.evaluate.calibrate`).
"""

from helpdp.evaluate.harness import (
    EvaluateConfig,
    compare,
    equal_spend_baseline,
    evaluate,
    headroom,
    mix_baseline,
    mix_curve,
    ope_estimates,
    ope_report,
    ope_summary,
    oracle_policy,
    paired_ci,
    policies,
    reuse_key,
    run_evaluate,
    summarize,
    task_mix,
)

__all__ = [
    "EvaluateConfig",
    "compare",
    "equal_spend_baseline",
    "evaluate",
    "headroom",
    "mix_baseline",
    "mix_curve",
    "ope_estimates",
    "ope_report",
    "ope_summary",
    "oracle_policy",
    "paired_ci",
    "policies",
    "reuse_key",
    "run_evaluate",
    "summarize",
    "task_mix",
]
