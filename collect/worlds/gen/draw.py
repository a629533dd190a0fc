"""Draw one world from a family and a seed: entities, column names, tools, seed rows.

A drawn world is a plain dict (JSON-able)::

    {"scenario", "family", "app", "what", "domain", "today",
     "entities": [entity, ...]}   # in creation order: person, party, group, extras, item, child

and an entity is::

    {"role", "singular", "plural", "cls", "label", "plural_label",
     "fields": [{"key", "col", "kind", "arg", "nullable", "label"}],
     "links": [{"role", "col", "target", "nullable", "label"}],
     "state": {"col", "states", "initial", "open", "close", "transitions": [...]} | None,
     "stamps": [columns set by transitions], "updated_at": bool,
     "ops": [tool kinds], "rows": [{column: value}]}
"""

from __future__ import annotations

import datetime as _dt
import random
import re

from collect.worlds.gen.spec import FIRST_NAMES, LAST_NAMES

#: a value of a seed row's column (NULL: None)
Value = int | float | str | None

#: the world's "today" (its clock.txt says noon of this day, UTC)
TODAY = _dt.date(2025, 6, 12)
CLOCK = "2025-06-12T12:00:00Z"
ROLES = ("person", "party", "group", "item", "child")
#: seed rows per role: (low, high)
ROW_COUNTS = {"person": (6, 9), "party": (7, 10), "group": (5, 7), "item": (20, 28), "child": (14, 24), "extra": (4, 6)}  # fmt: skip
MIN_TOOLS, MAX_TOOLS = 25, 45


def rng_for(*parts: object) -> random.Random:
    """A ``random.Random`` seeded from a string (hash randomisation does not reach it)."""
    return random.Random(":".join(str(p) for p in ("helpdp-worlds", *parts)))


#: how a link column reads in a task ("the installer of the device")
LINK_LABELS = {"installed_by": "installer", "handled_by": "handler", "logged_by": "author", "acknowledged_by": "acknowledger", "entered_by": "counter"}  # fmt: skip


def articled(text: str) -> str:
    """``text`` with "a" before a vowel as "an" ("an event", not "a event"; "a user" stays)."""
    return re.sub(r"\b([Aa]) (?=[aeioAEIO])", lambda m: m.group(1) + "n ", text)


def label(col: str) -> str:
    if col in LINK_LABELS:
        return LINK_LABELS[col]
    text = col[:-3] if col.endswith("_id") else col
    return text.replace("_", " ")


def camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


def _entity(role: str, var: dict, rng: random.Random, names: dict[str, str]) -> dict:
    singular, plural = var["names"]
    fields = []
    for f in var["fields"]:
        if f["opt"] < 1.0 and rng.random() >= f["opt"]:
            continue
        col = rng.choice(f["cols"])
        nullable = f["key"] not in ("name", "email", "body", "level", "active", "attr") and f[
            "kind"
        ] not in ("enum", "bool")
        fields.append(
            {
                "key": f["key"],
                "col": col,
                "kind": f["kind"],
                "arg": f["arg"],
                "nullable": nullable,
                "null": f["null"],
                "label": label(col),
            }
        )
    links = []
    for target, cols in var["links"].items():
        if target in ("party", "group", "item"):
            col = f"{names[target]}_id"
        else:
            col = rng.choice(cols)
        nullable = target == "person" or (role == "extra")
        links.append(
            {
                "role": target,
                "col": col,
                "target": target,
                "nullable": nullable,
                "label": label(col),
            }
        )
    state = None
    stamps = []
    if var["state"] is not None:
        m = var["state"]
        transitions = []
        for t in m["transitions"]:
            stamp = rng.choice(t["stamp"]) if t["stamp"] else None
            if stamp in stamps:
                stamp = None
            if stamp:
                stamps.append(stamp)
            transitions.append(
                {"action": t["action"], "from": t["from"], "to": t["to"], "stamp": stamp}
            )
        state = {
            "col": rng.choice(m["cols"]),
            "states": m["states"],
            "initial": m["states"][0],
            "open": m["open"],
            "close": m["close"],
            "weights": m["weights"],
            "transitions": transitions,
        }
    return {
        "role": role,
        "singular": singular,
        "plural": plural,
        "cls": camel(singular),
        "label": singular.replace("_", " "),
        "plural_label": plural.replace("_", " "),
        "fields": fields,
        "links": links,
        "state": state,
        "stamps": stamps,
        "updated_at": role in ("item", "party", "person"),
        "ops": [],
        "rows": [],
    }


def _ops(ent: dict, rng: random.Random) -> list[str]:
    role = ent["role"]
    base = ["list", "get", "create"]
    if role in ("party", "group", "item"):
        ops = [*base, "update", "delete"]
    elif role == "person":
        ops = [*base, "update"] + (["delete"] if rng.random() < 0.5 else [])
    elif role == "child":
        ops = (
            base
            + (["update"] if rng.random() < 0.3 else [])
            + (["delete"] if rng.random() < 0.6 else [])
        )
    else:
        ops = (
            base
            + (["update"] if rng.random() < 0.6 else [])
            + (["delete"] if rng.random() < 0.4 else [])
        )
    if ent["state"] is not None:
        ops += [f"transition:{t['action']}" for t in ent["state"]["transitions"]]
    return ops


DISTRACTORS = ("summary_level", "summary_state", "overview", "export_party")


def tool_count(world: dict) -> int:
    return sum(len(e["ops"]) for e in world["entities"]) + len(world["distractors"])


def _compatible(fam: dict, role: str, item: dict | None) -> list[dict]:
    """The variants of ``role`` that fit the drawn item: a party or group whose link column
    the item lists, a child that lists the item's link column (all, when none fits)."""
    options = fam["roles"][role]
    if item is None or role in ("item", "person"):
        return options
    if role == "child":
        fit = [v for v in options if f"{item['names'][0]}_id" in v["links"]["item"]]
    else:
        fit = [v for v in options if f"{v['names'][0]}_id" in item["links"][role]]
    return fit or options


def draw_world(fam: dict, seed: int, index: int) -> dict:
    """The world ``index`` of ``seed`` in family ``fam`` (its rows included)."""
    rng = rng_for(fam["key"], seed, index)
    app, what = rng.choice(fam["apps"])
    names: dict[str, str] = {}
    picked: dict[str, dict] = {}
    for role in ("item", "person", "party", "group", "child"):
        picked[role] = rng.choice(_compatible(fam, role, picked.get("item")))
        names[role] = picked[role]["names"][0]
    core = {role: _entity(role, picked[role], rng, names) for role in ROLES}
    taken = {e["plural"] for e in core.values()}
    pool = [x for x in fam["extras"] if x["names"][1] not in taken]
    extras = [
        _entity("extra", x, rng, names)
        for x in rng.sample(pool, k=min(len(pool), rng.randint(1, 3)))
    ]
    entities = [core["person"], core["party"], core["group"], *extras, core["item"], core["child"]]
    world = {
        "scenario": f"{fam['key']}_gen_{seed}_{index}",
        "family": fam["key"],
        "app": app,
        "what": what,
        "domain": rng.choice(fam["domains"]),
        "today": TODAY.isoformat(),
        "entities": entities,
        "distractors": [],
    }
    for e in entities:
        e["ops"] = _ops(e, rng)
    world["distractors"] = sorted(
        rng.sample(DISTRACTORS, k=rng.randint(2, 4)), key=DISTRACTORS.index
    )
    while tool_count(world) > MAX_TOOLS and len(world["distractors"]) > 1:
        world["distractors"].pop()
    while tool_count(world) > MAX_TOOLS:
        for e in world["entities"]:
            if e["role"] == "extra" and "delete" in e["ops"]:
                e["ops"].remove("delete")
                break
        else:
            break
    for e in reversed(world["entities"]):
        while tool_count(world) < MIN_TOOLS and e["role"] in ("extra", "child", "person"):
            missing = [op for op in ("update", "delete") if op not in e["ops"]]
            if not missing:
                break
            e["ops"].insert(3 if missing[0] == "update" else len(e["ops"]), missing[0])
    _seed_rows(world, rng)
    return world


# ---------------------------------------------------------------- seed rows


class _Unique:
    """Unique values per (entity, field), and person names unique across the world."""

    def __init__(self) -> None:
        self.used: dict[str, set] = {}

    def take(self, key: str, make, rng: random.Random, tries: int = 400):
        used = self.used.setdefault(key, set())
        for _ in range(tries):
            value = make(rng)
            low = str(value).lower()
            if low in used or any(low in u or u in low for u in used if isinstance(u, str)):
                continue
            used.add(low)
            return value
        return None


def _when(rng: random.Random, lo_days: int, hi_days: int, clock: bool = True) -> str:
    day = TODAY + _dt.timedelta(days=rng.randint(lo_days, hi_days))
    if not clock:
        return day.isoformat()
    return f"{day.isoformat()} {rng.randint(7, 19):02d}:{rng.choice((0, 15, 30, 45)):02d}:00"


def _value(f: dict, ent: dict, row: dict, rng: random.Random, uniq: _Unique) -> Value:
    kind, arg = f["kind"], f["arg"]
    if f["null"] and rng.random() < f["null"]:
        return None
    if kind == "person":
        return uniq.take("person", lambda r: f"{r.choice(FIRST_NAMES)} {r.choice(LAST_NAMES)}", rng)
    if kind == "title":
        return uniq.take(
            f"{ent['plural']}.{f['col']}", lambda r: f"{r.choice(arg[0])} {r.choice(arg[1])}", rng
        )
    if kind == "pool":
        return uniq.take(f"{ent['plural']}.{f['col']}", lambda r: r.choice(arg), rng, tries=200)
    if kind == "code":
        return uniq.take(
            f"{ent['plural']}.{f['col']}", lambda r: f"{arg}-{r.randint(1000, 9999)}", rng
        )
    if kind == "email":
        return None  # filled from the name below
    if kind == "enum":
        return rng.choice(arg)
    if kind == "int":
        return rng.randint(arg[0], arg[1])
    if kind == "money":
        lo, hi = arg
        return round(lo + (hi - lo) * rng.random(), 2)
    if kind == "bool":
        return 1 if rng.random() < arg else 0
    if kind == "date":
        return _when(rng, arg[0], arg[1], clock=False)
    if kind == "text":
        return rng.choice(arg)
    raise ValueError(f"unknown kind {kind}")


def _email(name: str, domain: str) -> str:
    return ".".join(name.lower().replace("'", "").split()) + "@" + domain


def _seed_rows(world: dict, rng: random.Random) -> None:
    uniq = _Unique()
    by_role = {e["role"]: e for e in world["entities"] if e["role"] != "extra"}
    for ent in world["entities"]:
        lo, hi = ROW_COUNTS[ent["role"]]
        n = rng.randint(lo, hi)
        rows = []
        for i in range(1, n + 1):
            row: dict[str, Value] = {"id": i}
            for f in ent["fields"]:
                row[f["col"]] = _value(f, ent, row, rng, uniq)
            name_col = next(f["col"] for f in ent["fields"] if f["key"] in ("name", "body"))
            if row[name_col] is None:  # the pool ran out: no more rows
                break
            for f in ent["fields"]:
                if f["kind"] == "email":
                    row[f["col"]] = _email(row[name_col], world["domain"])
            for link in ent["links"]:
                target = by_role[link["target"]]
                ids = [r["id"] for r in target["rows"]]
                if link["nullable"] and rng.random() < 0.2:
                    row[link["col"]] = None
                else:
                    row[link["col"]] = rng.choice(ids)
            st = ent["state"]
            if st is not None:
                state = rng.choices(st["states"], weights=st["weights"])[0]
                row[st["col"]] = state
                for t in st["transitions"]:
                    if t["stamp"]:
                        row[t["stamp"]] = _when(rng, -20, -1) if t["to"] == state else None
            row["created_at"] = _when(rng, -120, -21)
            if ent["updated_at"]:
                row["updated_at"] = row["created_at"]
            rows.append(row)
        ent["rows"] = rows


def columns(ent: dict) -> list[str]:
    """The entity's columns in table order."""
    cols = ["id", *(f["col"] for f in ent["fields"]), *(link["col"] for link in ent["links"])]
    if ent["state"] is not None:
        cols.append(ent["state"]["col"])
    cols += ent["stamps"]
    cols.append("created_at")
    if ent["updated_at"]:
        cols.append("updated_at")
    return cols
