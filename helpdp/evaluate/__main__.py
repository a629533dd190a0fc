"""``python -m helpdp.evaluate``: see :mod:`helpdp.evaluate.harness`."""

from helpdp.evaluate.harness import main

main()
