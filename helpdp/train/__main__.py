"""``python -m helpdp.train [train=cpu_smoke|b200] key=value ...``."""

from __future__ import annotations

from collect.awm.sandbox import COMMAND_ERRORS
from helpdp.cliconf import run_app
from helpdp.train.config import TrainConfig
from helpdp.train.trainer import run_cli


def main() -> None:
    run_app(
        "helpdp.train",
        TrainConfig,
        run_cli,
        config_name="train",
        groups=("train",),
        usage="python -m helpdp.train [train=cpu_smoke|b200] key=value ...",
        errors=COMMAND_ERRORS,
    )


if __name__ == "__main__":
    main()
