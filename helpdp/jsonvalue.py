"""The one name for a JSON value, shared by every package (#50).

A value read by ``json.loads`` or written by ``json.dumps`` (a dict, a list, a str, an
int, a float, a bool or None, nested) is :data:`JSON`; a JSON object is
``dict[str, JSON]``. It is ``Any`` on purpose: what a parser returns, or a peer sends,
is checked where it is read, not by its annotation. Everything else has its own type.
"""

from __future__ import annotations

from typing import Any

__all__ = ["JSON"]

#: any JSON value (``Any``: its shape is checked where it is read)
JSON = Any
