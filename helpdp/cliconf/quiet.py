"""Quiet by default: third-party warnings, log lines and progress bars off in every command.

:func:`cliconf.run_app` calls :func:`quiet_third_party` before a command runs, unless its
command line says ``verbose=true`` (a key of every command, popped before Hydra sees it,
like ``overwrite=``). Off: ``FutureWarning``/``DeprecationWarning`` raised inside
transformers, peft, trl, accelerate, torch and huggingface_hub (e.g. transformers'
``gradient_checkpointing is deprecated`` before a command's own one-line error);
transformers' log lines below ERROR (``Token indices sequence length is longer than
...``: the project cuts texts itself and says so) and its bars (``Writing model
shards``, ``Loading weights``); matplotlib's INFO lines (``generated new fontManager``,
which Hydra's INFO logging would show). The commands' own bars and lines stay.
Nothing heavy is imported here: the environment variables act when transformers loads.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Sequence

__all__ = ["VERBOSE_HELP", "pop_verbose", "quiet_third_party"]

THIRD_PARTY = r"(transformers|peft|trl|accelerate|torch|huggingface_hub)(\.|$)"
VERBOSE_HELP = [
    "  verbose=false",
    "    show third-party warnings, log lines and progress bars (transformers, torch, "
    "matplotlib), which are off by default",
]


def pop_verbose(command: str, args: Sequence[str]) -> tuple[list[str], bool]:
    """``args`` without ``verbose=<bool>``, and its value (default false)."""
    rest, verbose = [], False
    for arg in args:
        key, eq, value = arg.partition("=")
        if key.lstrip("+") != "verbose" or not eq:
            rest.append(arg)
            continue
        if value.lower() not in ("true", "false"):
            print(
                f"{command}: error: 'verbose' takes a bool (true|false), not {value!r}",
                file=sys.stderr,
            )
            raise SystemExit(2)
        verbose = value.lower() == "true"
    return rest, verbose


def quiet_third_party() -> None:
    """Switch the third-party noise off for this process (module docstring)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=THIRD_PARTY)
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    if "transformers" in sys.modules:  # already loaded: the variables came too late
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
