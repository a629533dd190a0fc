"""``load_prm(dir)``: open a PRM directory of any kind.

It dispatches on ``prm.json``'s ``kind`` to the kind's class. It sits apart from
``prm.base`` so that the base class never imports its subclasses (``prm.tabular``
and ``prm.lm`` import ``prm.base``, not the other way round); ``prm.lm`` (torch)
is imported only when a ``kind=lm`` PRM is loaded.
"""

from __future__ import annotations

from prm.base import PRM, read_meta


def load_prm(path, *, device: str = "auto") -> PRM:
    """Load a PRM directory written by ``PRM.save`` (``device`` is for ``kind=lm``)."""
    meta = read_meta(path)
    if meta["kind"] == "tabular":
        from prm.tabular import TabularPRM

        return TabularPRM.load(path)
    from prm.lm import LMPRM

    return LMPRM.load(path, device=device)
