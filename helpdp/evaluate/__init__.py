"""Every help policy in the environments, on held-out tasks, with paired intervals.

``python -m helpdp.evaluate`` runs the harness (:mod:`helpdp.evaluate.harness`), whose
paired statistics are in :mod:`helpdp.evaluate.stats` and whose report, plot and
off-policy tables are in :mod:`helpdp.evaluate.report`;
``python -m helpdp.evaluate.calibrate`` picks a helper's threshold per budget by
running it in the environments (:mod:`helpdp.evaluate.calibrate`).
"""

from helpdp.evaluate.harness import (
    EvaluateConfig,
    Evaluation,
    evaluate,
    evaluation,
    oracle_policy,
    policies,
    reuse_key,
    run_evaluate,
)
from helpdp.evaluate.report import ope_estimates, ope_report, ope_summary
from helpdp.evaluate.stats import (
    compare,
    equal_spend_baseline,
    headroom,
    mix_baseline,
    mix_curve,
    paired_ci,
    rule_hull_baseline,
    summarize,
    task_mix,
)

__all__ = [
    "EvaluateConfig",
    "Evaluation",
    "compare",
    "equal_spend_baseline",
    "evaluate",
    "evaluation",
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
    "rule_hull_baseline",
    "run_evaluate",
    "summarize",
    "task_mix",
]
