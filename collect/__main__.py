"""`python -m collect out=DIR`: the one-pass collector (fields: collect/config.py, or --help)."""

from collect.cli import main

if __name__ == "__main__":
    main()
