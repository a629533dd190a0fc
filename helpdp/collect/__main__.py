"""`python -m helpdp.collect out=DIR`: the one-pass collector (fields: helpdp/collect/collector.py, or --help)."""

from helpdp.collect.collector import main

if __name__ == "__main__":
    main()
