"""helpdp: decide when an LLM agent should ask an expert for help, under a budget.

The public API: load a dataset directory, solve the help-policy dynamic program at a
fixed help cost, search the cost that meets a budget, and trace the whole
usage-success frontier. Importing helpdp never imports torch.
"""

from helpdp.budget import InfeasibleBudget, SearchResult, mix_budgets, search_budget
from helpdp.contract import FORMAT_VERSION, build_manifest
from helpdp.data import MDP, Dataset, DatasetError, from_frames, load_dataset, write_dataset
from helpdp.demo import demo_dataset_path
from helpdp.pareto import Frontier, frontier
from helpdp.policies import HelpPolicy, StateView, TablePolicy
from helpdp.solve import Solution, behavior_values, score_rows, solve, state_success
from helpdp.synthetic import generate_synthetic, write_synthetic

__all__ = [
    "FORMAT_VERSION",
    "MDP",
    "Dataset",
    "DatasetError",
    "Frontier",
    "HelpPolicy",
    "InfeasibleBudget",
    "SearchResult",
    "Solution",
    "StateView",
    "TablePolicy",
    "behavior_values",
    "build_manifest",
    "demo_dataset_path",
    "from_frames",
    "frontier",
    "generate_synthetic",
    "mix_budgets",
    "load_dataset",
    "score_rows",
    "search_budget",
    "solve",
    "state_success",
    "write_dataset",
    "write_synthetic",
]
