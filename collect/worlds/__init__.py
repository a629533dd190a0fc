"""helpdp demo worlds in the Agent World Model (AWM) format.

The shipped artifacts are the ``gen_*.jsonl`` files next to this module; they are
regenerated from ``src/`` by ``python -m collect.worlds.build``.
"""

import pathlib

WORLDS_DIR = pathlib.Path(__file__).parent

SCENARIOS = ("workflow_automation_1", "e_commerce_admin_1", "smart_home_1")

#: what a manifest records as ``worlds`` for these worlds (no machine path)
SHIPPED_LABEL = "collect/worlds (shipped demo worlds)"


def is_shipped_label(worlds) -> bool:
    """Whether a manifest's ``worlds`` names the shipped worlds (this label, or the one
    datasets collected before the package layout recorded: ``collect/worlds (...)``)."""
    return worlds is not None and str(worlds).endswith("(shipped demo worlds)")


__all__ = ["SCENARIOS", "SHIPPED_LABEL", "WORLDS_DIR", "is_shipped_label"]
