"""helpdp demo worlds in the Agent World Model (AWM) format.

The shipped artifacts are the ``gen_*.jsonl`` files next to this module; they are
regenerated from ``src/`` by ``python -m collect.worlds.build``.
"""

import pathlib

WORLDS_DIR = pathlib.Path(__file__).parent

SCENARIOS = ("workflow_automation_1", "e_commerce_admin_1", "smart_home_1")

__all__ = ["WORLDS_DIR", "SCENARIOS"]
