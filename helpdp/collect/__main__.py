"""`python -m helpdp.collect out=DIR`: the one-pass collector (fields: helpdp/collect/config.py, or --help)."""

from helpdp.collect.cli import main

if __name__ == "__main__":
    main()
