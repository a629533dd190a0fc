"""The command-line wiring shared by every ``python -m ...`` command of this repository
(helpdp, prm, collect); it depends on none of them.

* :mod:`helpdp.cliconf.fields`: declare a config field once, with its documentation
  (:func:`doc_field`), and build typed configs from dicts (:func:`as_config`);
* :mod:`helpdp.cliconf.argv`: the checks at the command boundary (:func:`check_argv`,
  :func:`parse_budgets`, :func:`guard`);
* :mod:`helpdp.cliconf.app`: :func:`run_app`, the one way a command is wired to Hydra.
"""

from helpdp.cliconf.app import CONF_DIR, compose_config, help_text, register, run_app
from helpdp.cliconf.argv import ERRORS, Interrupted, UsageError, check_argv, guard, parse_budgets
from helpdp.cliconf.fields import as_config, doc_field, field_help_lines, to_dict

__all__ = [
    "CONF_DIR",
    "ERRORS",
    "Interrupted",
    "UsageError",
    "as_config",
    "check_argv",
    "compose_config",
    "doc_field",
    "field_help_lines",
    "guard",
    "help_text",
    "parse_budgets",
    "register",
    "run_app",
    "to_dict",
]
