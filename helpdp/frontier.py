"""`python -m helpdp.frontier`: the usage-success frontier from the command line.

Fields: helpdp/pareto.py (FrontierConfig), or `--help`. The work is in helpdp.pareto.
"""

from helpdp.cliconf import run_app
from helpdp.pareto import FrontierConfig, run_frontier


def main() -> None:
    run_app("helpdp.frontier", FrontierConfig, run_frontier, config_name="frontier")


if __name__ == "__main__":
    main()
