"""`python -m helpdp.frontier`: the usage-success frontier from the command line.

Fields: helpdp/config.py (FrontierConfig), or `--help`. The work is in helpdp.pareto.
"""

import hydra

from helpdp.config import register
from helpdp.pareto import run_frontier

register()


@hydra.main(version_base=None, config_path="../conf", config_name="frontier")
def main(cfg) -> None:
    run_frontier(cfg)


if __name__ == "__main__":
    main()
