"""``load_prm(dir)``: open a PRM directory of any kind.

It dispatches on ``prm.json``'s ``kind`` to the kind's class. It sits apart from
``helpdp.prm.base`` so that the base class never imports its subclasses (``helpdp.prm.tabular``
and ``helpdp.prm.lm`` import ``helpdp.prm.base``, not the other way round); ``helpdp.prm.lm`` (torch)
is imported only when a ``kind=lm`` PRM is loaded.
"""

from __future__ import annotations

from helpdp.prm.base import PRM, read_meta


def load_prm(path, *, device: str = "auto") -> PRM:
    """Load a PRM directory written by ``PRM.save`` (``device`` is for ``kind=lm``)."""
    meta = read_meta(path)
    if meta["kind"] == "tabular":
        from helpdp.prm.tabular import TabularPRM

        return TabularPRM.load(path)
    from helpdp.prm.lm import LMPRM

    return LMPRM.load(path, device=device)
