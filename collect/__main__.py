"""`python -m collect out=DIR`: the one-pass collector (fields: collect/collector.py, or --help)."""

import hydra

from collect.collector import CollectConfig, register, run_cli
from helpdp.cli import check_argv, guard

register()


@hydra.main(version_base=None, config_path="../conf", config_name="collect")
def main(cfg) -> None:
    guard("collect", run_cli, cfg)


if __name__ == "__main__":
    check_argv("collect", CollectConfig)
    main()
