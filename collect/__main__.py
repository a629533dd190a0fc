"""`python -m collect out=DIR`: the one-pass collector (fields: collect/collector.py, or --help)."""

from collect.collector import main

if __name__ == "__main__":
    main()
