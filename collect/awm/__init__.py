"""The Agent World Model (AWM) environment runtime (it never imports the collection side).

Load an AWM-format directory (:class:`AWMDataset`), run episodes in a sandboxed
app (:class:`AWMEnv`, :class:`EnvPool`), parse agent turns
(:func:`parse_turn`) and verify the final database. Heavier entry points:
``python -m collect.awm.check`` (dataset check), ``python -m collect.awm.serve``
(remote environments; client: :class:`collect.awm.client.EnvClient`).
"""

from collect.awm.database import BuildReport, build_database
from collect.awm.dataset import (
    AWMDataset,
    Scenario,
    Task,
    VerifierRecord,
    normalize_scenario_name,
)
from collect.awm.env import AWMEnv, EnvConfig, EnvPool
from collect.awm.episode import ResetResult, StepResult
from collect.awm.protocol import (
    Action,
    Failure,
    parse_turn,
    system_prompt,
)
from collect.awm.rewards import RewardConfig, episode_reward
from collect.awm.sandbox import SandboxError, SandboxLimits, VerifierPool
from collect.awm.tool_calls import ToolResult
from collect.awm.tools import Tool, format_tools, tools_from_openapi
from collect.awm.verification import Judge, JudgeConfig, Verification

__all__ = [
    "AWMDataset",
    "AWMEnv",
    "Action",
    "BuildReport",
    "EnvConfig",
    "EnvPool",
    "Failure",
    "Judge",
    "JudgeConfig",
    "ResetResult",
    "RewardConfig",
    "SandboxError",
    "SandboxLimits",
    "Scenario",
    "StepResult",
    "Task",
    "Tool",
    "ToolResult",
    "Verification",
    "VerifierPool",
    "VerifierRecord",
    "build_database",
    "episode_reward",
    "format_tools",
    "normalize_scenario_name",
    "parse_turn",
    "system_prompt",
    "tools_from_openapi",
]
