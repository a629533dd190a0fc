"""helpdp's runtime for Agent World Model (AWM) environments.

Load an AWM-format directory (:class:`AWMDataset`), run episodes in a sandboxed
app (:class:`AWMEnv`, :class:`EnvPool`), parse agent turns
(:func:`parse_turn`) and verify the final database. Heavier entry points:
``python -m collect.check`` (dataset check), ``python -m collect.serve``
(remote environments; client: :class:`collect.serve.EnvClient`).
"""

from collect.awm import AWMDataset, Scenario, Task, VerifierRecord, normalize_scenario_name
from collect.database import BuildReport, build_database
from collect.env import (
    AWMEnv,
    EnvConfig,
    EnvPool,
    Judge,
    JudgeConfig,
    ResetResult,
    StepResult,
    ToolResult,
    Verification,
)
from collect.protocol import (
    Action,
    Failure,
    RewardConfig,
    episode_reward,
    parse_turn,
    system_prompt,
)
from collect.sandbox import SandboxError, SandboxLimits, VerifierPool
from collect.tools import Tool, format_tools, tools_from_openapi

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
