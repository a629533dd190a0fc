"""`python -m helpdp.frontier`: the usage-success frontier from the command line.

Fields: helpdp/config.py (FrontierConfig), or `--help`. The work is in helpdp.pareto.
"""

import hydra

from helpdp.cli import check_argv, guard
from helpdp.config import FrontierConfig, register
from helpdp.pareto import run_frontier

register()


@hydra.main(version_base=None, config_path="../conf", config_name="frontier")
def main(cfg) -> None:
    guard("helpdp.frontier", run_frontier, cfg)


if __name__ == "__main__":
    check_argv("helpdp.frontier", FrontierConfig)
    main()
