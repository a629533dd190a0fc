"""`python -m helpdp.search budget=1.0`: the budget search from the command line.

Fields: helpdp/config.py (SearchConfig), or `--help`. The work is in helpdp.budget.
"""

from helpdp.budget import run_search
from helpdp.cliconf import run_app
from helpdp.config import SearchConfig


def main() -> None:
    run_app("helpdp.search", SearchConfig, run_search, config_name="search")


if __name__ == "__main__":
    main()
