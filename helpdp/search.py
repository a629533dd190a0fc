"""`python -m helpdp.search budget=1.0`: the budget search from the command line.

Fields: helpdp/config.py (SearchConfig), or `--help`. The work is in helpdp.budget.
"""

import hydra

from helpdp.budget import run_search
from helpdp.cli import check_argv, guard
from helpdp.config import SearchConfig, register

register()


@hydra.main(version_base=None, config_path="../conf", config_name="search")
def main(cfg) -> None:
    guard("helpdp.search", run_search, cfg)


if __name__ == "__main__":
    check_argv("helpdp.search", SearchConfig)
    main()
