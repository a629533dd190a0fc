"""The vocabulary of family definitions: fields, state machines, entity variants.

A family (see :mod:`collect.worlds.gen.families`) is a dict::

    {"key", "apps": [(app name, what it is)], "domains": [email domains],
     "roles": {"person"|"party"|"group"|"item"|"child": [variant, ...]},
     "extras": [variant, ...]}

and a variant is ``{"names": (singular, plural), "fields": [field, ...], "links":
{role: [column names]}, "state": machine | None}``. A world draws its item first; an
item's ``links`` name the party and group variants that fit it (``customer_id``: the
``customer`` variant) and a child's ``item`` link names the items it fits; the item's
person link column is drawn from its list. The task builder relies on field
*keys*, not column names: every entity has ``name`` (``body`` for a child), a person
has ``email`` and ``active``, a party and a group have ``attr`` (the field a task
updates or sets), an item has ``level`` (an enum of at least three values) and a
state machine.
"""

from __future__ import annotations

#: field kinds and what their ``arg`` is
KINDS = {
    "person": "none (a person's full name, unique)",
    "title": "(first words, second words): unique 'first second' names",
    "pool": "a list of unique names",
    "email": "none (derived from the entity's name)",
    "enum": "the allowed values (the first is the default)",
    "int": "(low, high)",
    "money": "(low, high), two decimals",
    "bool": "probability of true",
    "date": "(low, high) days from the world's today",
    "text": "a list of phrases (not unique)",
    "code": "a prefix: unique codes like PREFIX-1042",
}

FIRST_NAMES = (
    "Ana", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonah",
    "Kira", "Liam", "Maya", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tara",
    "Uma", "Victor", "Wen", "Yara", "Zane", "Aiko", "Bruno", "Carmen", "Diego", "Esme",
)  # fmt: skip
LAST_NAMES = (
    "Alvarez", "Brooks", "Chen", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad",
    "Ito", "Jensen", "Kowalski", "Larsen", "Moreau", "Nakamura", "Okafor", "Patel",
    "Quiroga", "Rossi", "Schmidt", "Tanaka", "Umar", "Varga", "Walsh", "Yilmaz", "Zhou",
)  # fmt: skip


def field(
    key: str, cols: list[str] | str, kind: str, arg: object = None, **kw: float | str
) -> dict:
    """One field template: ``key`` (what tasks call it), the column names a world draws
    from, its kind (:data:`KINDS`) and ``opt`` (probability that a world has it; 1.0:
    always), ``null`` (probability that a seed value is NULL)."""
    if kind not in KINDS:
        raise ValueError(f"field {key}: unknown kind {kind!r}")
    out = {"key": key, "cols": [cols] if isinstance(cols, str) else list(cols), "kind": kind}
    out["arg"] = arg
    out["opt"] = float(kw.pop("opt", 1.0))
    out["null"] = float(kw.pop("null", 0.0))
    out["desc"] = str(kw.pop("desc", ""))
    if kw:
        raise ValueError(f"field {key}: unknown options {sorted(kw)}")
    return out


def machine(
    cols: list[str],
    states: list[str],
    transitions: list[tuple[str, list[str], str, list[str] | None]],
    *,
    open_state: str,
    close: str,
    weights: list[int],
) -> dict:
    """A state machine: the state column's names, its states (the first is the initial
    one), transitions ``(action, from states, to state, stamp column names or None)``,
    the ``open_state`` the bulk tasks filter on, the ``close`` action that leaves it, and
    the seed rows' weight per state."""
    if len(weights) != len(states):
        raise ValueError(f"state machine {states}: {len(weights)} weights")
    actions = {t[0] for t in transitions}
    if close not in actions or open_state not in states:
        raise ValueError(f"state machine {states}: close={close!r} open={open_state!r}")
    for action, froms, to, _stamp in transitions:
        if to not in states or any(s not in states for s in froms):
            raise ValueError(f"state machine {states}: transition {action} uses unknown states")
    close_t = next(t for t in transitions if t[0] == close)
    if open_state not in close_t[1]:
        raise ValueError(f"state machine: {close} does not leave {open_state}")
    return {
        "cols": list(cols),
        "states": list(states),
        "transitions": [
            {"action": a, "from": list(f), "to": t, "stamp": list(s) if s else None}
            for a, f, t, s in transitions
        ],
        "open": open_state,
        "close": close,
        "weights": list(weights),
    }


def variant(
    names: tuple[str, str],
    fields: list[dict],
    *,
    links: dict[str, list[str]] | None = None,
    state: dict | None = None,
) -> dict:
    return {"names": names, "fields": fields, "links": dict(links or {}), "state": state}


def family(key: str, apps, domains, roles: dict[str, list[dict]], extras: list[dict]) -> dict:
    """A family, checked for the keys the task builder needs."""
    need = {
        "person": ("name", "email", "active"),
        "party": ("name", "attr"),
        "group": ("name", "attr"),
        "item": ("name", "level"),
        "child": ("body",),
    }
    for role, keys in need.items():
        if not roles.get(role):
            raise ValueError(f"family {key}: no {role} variant")
        for v in roles[role]:
            have = {f["key"] for f in v["fields"] if f["opt"] >= 1.0}
            missing = [k for k in keys if k not in have]
            if missing:
                raise ValueError(f"family {key}: {role} {v['names'][0]} lacks {missing}")
            if role == "item":
                level = next(f for f in v["fields"] if f["key"] == "level")
                if level["kind"] != "enum" or len(level["arg"]) < 3 or v["state"] is None:
                    raise ValueError(f"family {key}: item {v['names'][0]} level/state")
                if set(v["links"]) != {"person", "party", "group"}:
                    raise ValueError(f"family {key}: item {v['names'][0]} links")
            if role == "child" and "item" not in v["links"]:
                raise ValueError(f"family {key}: child {v['names'][0]} has no item link")
    for v in extras:
        if not any(f["key"] == "name" for f in v["fields"]):
            raise ValueError(f"family {key}: extra {v['names'][0]} has no name")
    return {
        "key": key,
        "apps": list(apps),
        "domains": list(domains),
        "roles": roles,
        "extras": extras,
    }
