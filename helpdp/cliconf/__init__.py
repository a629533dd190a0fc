"""The command-line wiring shared by every ``python -m ...`` command of this repository
(helpdp, prm, collect); it depends on none of them.

* :mod:`helpdp.cliconf.fields`: declare a config field once, with its documentation
  (:func:`doc_field`), and build typed configs from dicts (:func:`as_config`);
* :mod:`helpdp.cliconf.argv`: the checks at the command boundary (:func:`check_argv`,
  :func:`parse_budgets`, :func:`guard`);
* :mod:`helpdp.cliconf.outdir`: one command's outputs per ``out=`` directory, recorded
  in ``OUT/.hydra/`` and never replaced unasked (:func:`claim_out`, :func:`lock_out`);
* :mod:`helpdp.cliconf.app`: :func:`run_app`, the one way a command is wired to Hydra.
"""

from helpdp.cliconf.app import CONF_DIR, Usage, compose_config, help_text, register, run_app
from helpdp.cliconf.argv import ERRORS, Interrupted, UsageError, check_argv, guard, parse_budgets
from helpdp.cliconf.fields import as_config, doc_field, field_help_lines, to_dict
from helpdp.cliconf.outdir import RECORD, claim_out, guards_out, lock_out, read_record

__all__ = [
    "CONF_DIR",
    "ERRORS",
    "RECORD",
    "Interrupted",
    "Usage",
    "UsageError",
    "as_config",
    "check_argv",
    "claim_out",
    "compose_config",
    "doc_field",
    "field_help_lines",
    "guard",
    "guards_out",
    "help_text",
    "lock_out",
    "parse_budgets",
    "read_record",
    "register",
    "run_app",
    "to_dict",
]
