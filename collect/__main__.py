"""`python -m collect out=DIR`: the one-pass collector (fields: collect/collector.py, or --help)."""

import hydra

from collect.collector import register, run_cli

register()


@hydra.main(version_base=None, config_path="../conf", config_name="collect")
def main(cfg) -> None:
    run_cli(cfg)


if __name__ == "__main__":
    main()
