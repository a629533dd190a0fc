"""The one registry of help-policy kinds: how each is named, parsed, printed and classified.

A kind is registered once, on its class (``helpdp.policies`` decorates each of its
classes with :func:`register`), with everything the rest of the package asks about it:

* ``forms``: its spec strings as :func:`helpdp.policies.build_policy`'s error lists them
  (``turns:0,2``); ``parse(spec, seed, action)``: the policy a (stripped) spec string
  names, or None when the string is not this kind's;
* ``kind`` and ``from_dict(d, seed, action, load_json)``: its JSON dict (``{"kind":
  "rule", "turns": [0, 3]}``), where it has one;
* ``spec(policy)``: the spec that rebuilds a policy of the class (``policy_spec``);
  ``subclasses``: whether that also holds for its subclasses (else the exact class);
* ``family``: what the evaluation (``helpdp.evaluate``) needs to know about it, one of
  :data:`FAMILIES`; ``display``: a regular expression that the start of its display
  names (``policy.name``) matches, for the tables that carry only the names.

Kinds are tried in the order they were registered (the first whose ``parse`` answers
wins), so a specific name (``after:failure``) is registered before a grammar that would
also read it (``after:EVENTS``). A new policy is one class and one :func:`register`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FAMILIES",
    "PolicyKind",
    "dict_kinds",
    "find_kind",
    "kinds",
    "name_family",
    "parse_dict",
    "parse_name",
    "policy_family",
    "print_spec",
    "register",
    "spec_forms",
    "unregister",
]

FAMILIES = {
    "baseline": "never, always: the ends of the random-help curve and of the rules' hull",
    "random": "random state-wise help: the equal-spend curve (no comparison of its own)",
    "rule": "a fixed rule: what the rules' hull mixes",
    "candidate": "compared like any candidate (random episode-wise help, a stage-2 design)",
}


@dataclass(frozen=True)
class PolicyKind:
    """One registered kind of policy (module docstring)."""

    cls: type
    family: str
    forms: tuple[str, ...] = ()
    parse: Callable[[str, int, int], object] | None = None
    kind: str | None = None
    from_dict: Callable[[dict, int, int, Any], object] | None = None
    spec: Callable[[Any], str | dict | None] | None = None
    display: str | None = None
    subclasses: bool = False


_KINDS: dict[type, PolicyKind] = {}


def register(
    *,
    family: str,
    forms: tuple[str, ...] | str = (),
    parse: Callable[[str, int, int], object] | None = None,
    kind: str | None = None,
    from_dict: Callable[[dict, int, int, Any], object] | None = None,
    spec: Callable[[Any], str | dict | None] | None = None,
    display: str | None = None,
    subclasses: bool = False,
):
    """A class decorator that registers the class as a kind (module docstring); a
    second registration of a class, an unknown family or a dict kind taken by another
    class is a ``ValueError``."""
    if family not in FAMILIES:
        raise ValueError(f"register: family {family!r} is not one of {sorted(FAMILIES)}")
    if (kind is None) != (from_dict is None):
        raise ValueError("register: a dict kind needs both kind= and from_dict=")

    def deco(cls: type) -> type:
        if cls in _KINDS:
            raise ValueError(f"register: {cls.__name__} is registered already")
        if kind is not None and kind in dict_kinds():
            raise ValueError(f"register: dict kind {kind!r} is registered already")
        _KINDS[cls] = PolicyKind(
            cls,
            family,
            (forms,) if isinstance(forms, str) else tuple(forms),
            parse,
            kind,
            from_dict,
            spec,
            display,
            subclasses,
        )
        return cls

    return deco


def unregister(cls: type) -> None:
    """Remove ``cls``'s kind (a test's toy kind); a class not registered is a no-op."""
    _KINDS.pop(cls, None)


def kinds() -> list[PolicyKind]:
    """The registered kinds in registration order."""
    return list(_KINDS.values())


def spec_forms() -> list[str]:
    """Every kind's spec-string forms, in registration order (the error's list)."""
    return [f for k in _KINDS.values() for f in k.forms]


def dict_kinds() -> list[str]:
    """The dict ``kind`` values, in registration order."""
    return [k.kind for k in _KINDS.values() if k.kind is not None]


def parse_name(spec: str, seed: int, action: int):
    """The policy of the first kind whose ``parse`` reads ``spec``, else None."""
    s = spec.strip()
    for k in list(_KINDS.values()):
        if k.parse is not None:
            pol = k.parse(s, seed, action)
            if pol is not None:
                return pol
    return None


def parse_dict(d: dict, seed: int, action: int, load_json):
    """The policy of the kind ``d["kind"]`` names (its ``seed`` field overrides ``seed``)."""
    kind = d.get("kind")
    seed = int(d.get("seed", seed))
    for k in list(_KINDS.values()):
        if k.kind is not None and k.kind == kind:
            return k.from_dict(d, seed, action, load_json)
    names = dict_kinds()
    listed = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)
    raise ValueError(f"policy {d!r}: field 'kind' must be {listed}")


def find_kind(policy) -> PolicyKind | None:
    """The kind of ``policy``: its exact class's, else that of a registered base class
    registered with ``subclasses=True``; None for a policy the registry does not know."""
    k = _KINDS.get(type(policy))
    if k is not None:
        return k
    for k in _KINDS.values():
        if k.subclasses and isinstance(policy, k.cls):
            return k
    return None


def print_spec(policy) -> str | dict | None:
    """The spec its kind prints for ``policy`` (None: no kind, or it cannot be named)."""
    k = find_kind(policy)
    return None if k is None or k.spec is None else k.spec(policy)


def policy_family(policy) -> str | None:
    """The :data:`FAMILIES` entry of ``policy``'s kind (None: not a registry policy, such
    as a DP table, a score threshold or a helper)."""
    k = find_kind(policy)
    return None if k is None else k.family


def name_family(name: str) -> str | None:
    """The family of the first kind whose ``display`` the start of ``name`` (a display
    name, as a results table carries it) matches; None where none does."""
    for k in list(_KINDS.values()):
        if k.display is not None and re.match(k.display, str(name)):
            return k.family
    return None
