"""Ten graded tasks per drawn world, with reference solutions and expected changes.

The builder first *shapes* the seed rows so that the bulk tasks have exactly the rows
they are about (it may change a seed row's person, party, level or state), then builds
every task from the final rows alone, so that a task's solution and its expected change
always agree with the data. Reference calls per task: 1, 1, 2, 2, 2, 3, 4, 4-5, 5-7,
6-8, in that order but sorted by calls (look-ups, a creation, a multi-hop look-up, an update or a deletion, a state
transition, a creation with looked-up links, linked creations, a conditional bulk
update, a hand-over, a bulk log-and-transition).
"""

from __future__ import annotations

import random

from collect.worlds.gen.draw import Value, _email, _when, articled, rng_for
from collect.worlds.gen.spec import FIRST_NAMES, LAST_NAMES
from collect.worlds.src.common import call

BULK_NOTES = (
    "Handled in the weekly review.",
    "Closed in bulk after the audit.",
    "Reviewed by the team lead.",
    "Follow-up done, see thread.",
)


class _World:
    """Accessors over a drawn world."""

    def __init__(self, world: dict) -> None:
        self.w = world
        self.by_role = {e["role"]: e for e in world["entities"] if e["role"] != "extra"}

    def __getitem__(self, role: str) -> dict:
        return self.by_role[role]

    @staticmethod
    def col(ent: dict, key: str) -> str:
        return next(f["col"] for f in ent["fields"] if f["key"] == key)

    @staticmethod
    def fld(ent: dict, key: str) -> dict:
        return next(f for f in ent["fields"] if f["key"] == key)

    @staticmethod
    def link(ent: dict, role: str) -> dict:
        return next(link for link in ent["links"] if link["target"] == role)

    def name(self, role: str, rid: int) -> str:
        ent = self[role]
        key = "body" if role == "child" else "name"
        return next(r for r in ent["rows"] if r["id"] == rid)[self.col(ent, key)]

    def row(self, role: str, rid: int) -> dict:
        return next(r for r in self[role]["rows"] if r["id"] == rid)

    def new_id(self, role: str) -> int:
        return max(r["id"] for r in self[role]["rows"]) + 1


def _set_state(ent: dict, row: dict, state: str, rng: random.Random) -> None:
    st = ent["state"]
    row[st["col"]] = state
    for t in st["transitions"]:
        if t["stamp"]:
            row[t["stamp"]] = _when(rng, -20, -1) if t["to"] == state else None


def _fresh_name(ent: dict, key: str, rng: random.Random) -> str:
    """A value of ``ent``'s ``key`` field that no row has: preferably one that is not part of
    an existing value nor contains one (a name search then finds one row), else (a small
    pool used up) one that merely differs from every existing value."""
    f = next(f for f in ent["fields"] if f["key"] == key)
    used = [str(r[f["col"]]).lower() for r in ent["rows"]]
    kind, arg = f["kind"], f["arg"]
    pool = list(arg) if kind == "pool" else ["Unit"]
    for i in range(600):
        if kind == "person":
            value = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        elif kind == "title":
            value = f"{rng.choice(arg[0])} {rng.choice(arg[1])}"
        elif kind == "code":
            value = f"{arg}-{rng.randint(1000, 9999)}"
        elif i < 100:
            value = rng.choice(pool)
        else:
            value = f"{rng.choice(('New', 'North', 'Second', 'Extra', 'Annex'))} {rng.choice(pool)}"
        low = value.lower()
        if i < 400 and any(low in u or u in low for u in used):
            continue
        if low not in used:
            return value
    raise ValueError(f"{ent['plural']}: no fresh {key}")


def _new_value(f: dict, current: Value, rng: random.Random) -> Value:
    """A value of field ``f`` other than ``current``."""
    if f["kind"] == "enum":
        return rng.choice([v for v in f["arg"] if v != current])
    lo, hi = f["arg"]
    for _ in range(100):
        value = (
            rng.randint(int(lo), int(hi)) if f["kind"] == "int" else round(rng.uniform(lo, hi), 2)
        )
        if value != current:
            return value
    return (current or 0) + 1


def _expect(**kw: object) -> dict:
    out = {"updated": {}, "deleted": {}, "created": [], "ignore": {}, "answer": []}
    out.update(kw)
    return out


def _shape(W: _World, rng: random.Random) -> dict:
    """Pick the bulk tasks' people, party and rows and make the seed rows fit them."""
    person, party, item = W["person"], W["party"], W["item"]
    st = item["state"]
    open_s = st["open"]
    pcol, xcol = W.link(item, "person")["col"], W.link(item, "party")["col"]
    lcol, acol = W.col(item, "level"), W.col(person, "active")
    levels = W.fld(item, "level")["arg"]
    other_states = [s for s in st["states"] if s != open_s]
    people = rng.sample([r["id"] for r in person["rows"]], 3)
    for pid in people:
        W.row("person", pid)[acol] = 1
    p7, pa, pb = people
    x9 = rng.choice([r["id"] for r in party["rows"]])
    v7, l9 = rng.choice(levels), rng.choice(levels)
    k7, k8, k9 = rng.choice((2, 3)), rng.choice((1, 2, 3)), rng.choice((2, 3))
    free = [r["id"] for r in item["rows"]]
    rng.shuffle(free)
    t7, t8, t9 = free[:k7], free[k7 : k7 + k8], free[k7 + k8 : k7 + k8 + k9]
    rest = [p for p in [r["id"] for r in person["rows"]] if p not in people]
    other_parties = [r["id"] for r in party["rows"] if r["id"] != x9]
    for rid in t7 + t8 + t9:
        row = W.row("item", rid)
        _set_state(item, row, open_s, rng)
        if rid in t9:
            row[xcol], row[lcol] = x9, l9
            row[pcol] = rng.choice(rest + [None])
        else:
            row[pcol] = p7 if rid in t7 else pa
            row[xcol] = rng.choice(other_parties)
            if rid in t7 and row[lcol] == v7:
                row[lcol] = rng.choice([v for v in levels if v != v7])
    targets = set(t7 + t8 + t9)
    for row in item["rows"]:
        if row["id"] in targets or row[st["col"]] != open_s:
            continue
        if row[pcol] in (p7, pa) or (row[xcol] == x9 and row[lcol] == l9):
            _set_state(item, row, rng.choice(other_states), rng)
    # a group nothing refers to (the deletion task), and a party row for the update task
    group = W["group"]
    gid = rng.choice([r["id"] for r in group["rows"]])
    others = [r["id"] for r in group["rows"] if r["id"] != gid]
    for ent in W.w["entities"]:
        for link in ent["links"]:
            if link["target"] == "group":
                for row in ent["rows"]:
                    if row[link["col"]] == gid:
                        row[link["col"]] = rng.choice(others)
    return {
        "p7": p7,
        "pa": pa,
        "pb": pb,
        "x9": x9,
        "v7": v7,
        "l9": l9,
        "spare_group": gid,
        "reserved": sorted(targets),
    }


def _pick(rng: random.Random, options: list[str], **kw: object) -> str:
    return articled(rng.choice(options).format(**kw))


def build_tasks(world: dict) -> list[dict]:
    """``[{task, calls, final_answer, expect}]``: ten tasks, easiest first (shapes the rows)."""
    rng = rng_for("tasks", world["scenario"])
    W = _World(world)
    plan = _shape(W, rng)
    makers = (_t0_count, _t1_create_group, _t2_lookup, _t3_update_or_delete, _t4_transition,
              _t5_create_item, _t6_linked, _t7_bulk_update, _t8_handover, _t9_bulk_close)  # fmt: skip
    tasks = [make(W, plan, rng_for("task", world["scenario"], i)) for i, make in enumerate(makers)]
    for i, t in enumerate(tasks):
        if not 1 <= len(t["calls"]) <= 8:
            raise ValueError(f"{world['scenario']} task {i}: {len(t['calls'])} calls")
    return sorted(tasks, key=lambda t: len(t["calls"]))  # graded: fewest calls first (stable)


def _labels(W: _World) -> dict:
    item, person, party, group, child = (
        W[r] for r in ("item", "person", "party", "group", "child")
    )
    st = item["state"]
    return {
        "item": item["label"], "items": item["plural_label"], "person": person["label"],
        "party": party["label"], "group": group["label"], "child": child["label"],
        "scol": st["col"], "open": st["open"], "level": W.fld(item, "level")["label"],
        "plink": W.link(item, "person")["label"],
    }  # fmt: skip


def _t0_count(W: _World, plan: dict, rng: random.Random) -> dict:
    item = W["item"]
    st = item["state"]
    counts = {s: sum(1 for r in item["rows"] if r[st["col"]] == s) for s in st["states"]}
    state = rng.choice([s for s in st["states"] if counts[s] > 0])
    text = _pick(rng, [
        "How many {items} are currently in {scol} '{s}'? Reply with the number.",
        "Count the {items} whose {scol} is {s} and tell me the total.",
        "Quick question: how many {items} have {scol} {s} right now?",
    ], s=state, **_labels(W))  # fmt: skip
    return {"task": text, "calls": [call(f"list_{item['plural']}", **{st["col"]: state})],
            "final_answer": str(counts[state]), "expect": _expect(answer=[str(counts[state])])}  # fmt: skip


def _t1_create_group(W: _World, plan: dict, rng: random.Random) -> dict:
    group = W["group"]
    name = _fresh_name(group, "name", rng)
    attr = W.fld(group, "attr")
    value = _new_value(attr, None, rng)
    text = _pick(rng, [
        "Add a new {group} named '{n}' with {a} set to {v}.",
        "Please create the {group} '{n}'; its {a} should be {v}.",
        "We need another {group}: call it '{n}' and give it a {a} of {v}.",
    ], n=name, a=attr["label"], v=value, **_labels(W))  # fmt: skip
    args = {W.col(group, "name"): name, attr["col"]: value}
    return {"task": text, "calls": [call(f"create_{group['singular']}", **args)], "final_answer": None,
            "expect": _expect(created=[[group["plural"], args]])}  # fmt: skip


def _t2_lookup(W: _World, plan: dict, rng: random.Random) -> dict:
    item, person = W["item"], W["person"]
    pcol = W.link(item, "person")["col"]
    rows = [r for r in item["rows"] if r[pcol] is not None and r["id"] not in plan["reserved"]]
    row = rng.choice(rows)
    title = row[W.col(item, "name")]
    email = W.row("person", row[pcol])[W.col(person, "email")]
    text = _pick(rng, [
        "What is the email address of the {plink} of the {item} '{t}'?",
        "Who is the {plink} on the {item} '{t}'? I need their email address.",
        "Find the {item} '{t}' and tell me the email of its {plink}.",
    ], t=title, **_labels(W))  # fmt: skip
    calls = [
        call(f"list_{item['plural']}", search=title),
        call(f"get_{person['singular']}", **{f"{person['singular']}_id": row[pcol]}),
    ]
    return {"task": text, "calls": calls, "final_answer": email, "expect": _expect(answer=[email])}


def _t3_update_or_delete(W: _World, plan: dict, rng: random.Random) -> dict:
    if rng.random() < 0.5:
        group = W["group"]
        gid = plan["spare_group"]
        name = W.name("group", gid)
        text = _pick(rng, [
            "Delete the {group} '{g}'; nothing uses it any more.",
            "Remove the unused {group} '{g}'.",
            "Please get rid of the {group} called '{g}'.",
        ], g=name, **_labels(W))  # fmt: skip
        calls = [
            call(f"list_{group['plural']}", search=name),
            call(f"delete_{group['singular']}", **{f"{group['singular']}_id": gid}),
        ]
        return {
            "task": text,
            "calls": calls,
            "final_answer": None,
            "expect": _expect(deleted={group["plural"]: [gid]}),
        }
    party = W["party"]
    row = rng.choice(party["rows"])
    attr = W.fld(party, "attr")
    value = _new_value(attr, row[attr["col"]], rng)
    name = row[W.col(party, "name")]
    text = _pick(rng, [
        "Change the {a} of the {party} '{x}' to {v}.",
        "The {party} '{x}' now has {a} {v}; update the record.",
        "Set {a} to {v} for {party} '{x}'.",
    ], a=attr["label"], x=name, v=value, **_labels(W))  # fmt: skip
    sing = party["singular"]
    calls = [
        call(f"list_{party['plural']}", search=name),
        call(f"update_{sing}", **{f"{sing}_id": row["id"], attr["col"]: value}),
    ]
    exp = _expect(
        updated={party["plural"]: {str(row["id"]): {attr["col"]: value}}},
        ignore={party["plural"]: ["updated_at"]},
    )
    return {"task": text, "calls": calls, "final_answer": None, "expect": exp}


def _ignore_item(item: dict) -> list[str]:
    return ["updated_at", *item["stamps"]]


def _t4_transition(W: _World, plan: dict, rng: random.Random) -> dict:
    item = W["item"]
    st = item["state"]
    options = []
    for row in item["rows"]:
        if row["id"] in plan["reserved"]:
            continue
        for t in st["transitions"]:
            if row[st["col"]] in t["from"]:
                options.append((row, t))
    row, t = rng.choice(options)
    title = row[W.col(item, "name")]
    text = _pick(rng, [
        "Move the {item} '{t}' to {scol} '{to}'.",
        "The {item} '{t}' should now be {to}; please update it.",
        "Use the '{act}' action on the {item} '{t}'.",
    ], t=title, to=t["to"], act=t["action"].replace("_", " "), **_labels(W))  # fmt: skip
    sing = item["singular"]
    calls = [
        call(f"list_{item['plural']}", search=title),
        call(f"{t['action']}_{sing}", **{f"{sing}_id": row["id"]}),
    ]
    exp = _expect(
        updated={item["plural"]: {str(row["id"]): {st["col"]: t["to"]}}},
        ignore={item["plural"]: _ignore_item(item)},
    )
    return {"task": text, "calls": calls, "final_answer": None, "expect": exp}


def _item_args(
    W: _World, title: str, rng: random.Random, party_id: Value, group_id: int
) -> tuple[dict, str]:
    item = W["item"]
    level = W.fld(item, "level")
    value = rng.choice(level["arg"])
    args = {
        W.col(item, "name"): title,
        level["col"]: value,
        W.link(item, "party")["col"]: party_id,
        W.link(item, "group")["col"]: group_id,
    }
    return args, value


def _t5_create_item(W: _World, plan: dict, rng: random.Random) -> dict:
    item, party, group = W["item"], W["party"], W["group"]
    title = _fresh_name(item, "name", rng)
    xrow = rng.choice(party["rows"])
    grow = rng.choice([r for r in group["rows"] if r["id"] != plan["spare_group"]])
    xname, gname = xrow[W.col(party, "name")], grow[W.col(group, "name")]
    args, value = _item_args(W, title, rng, xrow["id"], grow["id"])
    text = _pick(rng, [
        "Create a {item} '{t}' for the {party} '{x}' in the {group} '{g}', with {level} {v}.",
        "Log a new {item} called '{t}': {party} '{x}', {group} '{g}', {level} {v}.",
        "Open a {item} named '{t}' ({level}: {v}) under the {group} '{g}' for the {party} '{x}'.",
    ], t=title, x=xname, g=gname, v=value, **_labels(W))  # fmt: skip
    calls = [
        call(f"list_{party['plural']}", search=xname),
        call(f"list_{group['plural']}", search=gname),
        call(f"create_{item['singular']}", **args),
    ]
    spec = {**args, item["state"]["col"]: item["state"]["initial"]}
    return {
        "task": text,
        "calls": calls,
        "final_answer": None,
        "expect": _expect(created=[[item["plural"], spec]]),
    }


def _t6_linked(W: _World, plan: dict, rng: random.Random) -> dict:
    item, party, group, child = W["item"], W["party"], W["group"], W["child"]
    xname = _fresh_name(party, "name", rng)
    attr = W.fld(party, "attr")
    xval = _new_value(attr, None, rng)
    title = _fresh_name(item, "name", rng)
    grow = rng.choice([r for r in group["rows"] if r["id"] != plan["spare_group"]])
    gname = grow[W.col(group, "name")]
    note = rng.choice(W.fld(child, "body")["arg"])
    xid, tid = W.new_id("party"), W.new_id("item")
    xargs = {W.col(party, "name"): xname, attr["col"]: xval}
    if any(f["kind"] == "email" for f in party["fields"]):
        xargs[W.col(party, "email")] = _email(xname, W.w["domain"])
    iargs, value = _item_args(W, title, rng, xid, grow["id"])
    cargs = {W.col(child, "body"): note, W.link(child, "item")["col"]: tid}
    text = _pick(rng, [
        "We have a new {party}, '{x}' ({a}: {xv}). Add it, then create a {item} '{t}' for it in the {group} '{g}' with {level} {v}, and add a {child} to that {item} saying \"{b}\".",
        "Set up the {party} '{x}' with {a} {xv}; open the {item} '{t}' ({level} {v}, {group} '{g}') for them and record a {child}: \"{b}\".",
        "Create the {party} '{x}' ({a} = {xv}) and a first {item} for it, '{t}', in {group} '{g}' at {level} {v}. Then attach the {child} \"{b}\" to the new {item}.",
    ], x=xname, a=attr["label"], xv=xval, t=title, g=gname, v=value, b=note, **_labels(W))  # fmt: skip
    calls = [
        call(f"create_{party['singular']}", **xargs),
        call(f"list_{group['plural']}", search=gname),
        call(f"create_{item['singular']}", **iargs),
        call(f"create_{child['singular']}", **cargs),
    ]
    ispec = {**iargs, W.link(item, "party")["col"]: {"$new": 0}}
    cspec = {**cargs, W.link(child, "item")["col"]: {"$new": 1}}
    exp = _expect(
        created=[[party["plural"], xargs], [item["plural"], ispec], [child["plural"], cspec]]
    )
    return {"task": text, "calls": calls, "final_answer": None, "expect": exp}


def _open_items(W: _World, **where: Value) -> list[dict]:
    item = W["item"]
    st = item["state"]
    return [
        r
        for r in item["rows"]
        if r[st["col"]] == st["open"] and all(r[k] == v for k, v in where.items())
    ]


def _t7_bulk_update(W: _World, plan: dict, rng: random.Random) -> dict:
    item, person = W["item"], W["person"]
    pcol, lcol = W.link(item, "person")["col"], W.col(item, "level")
    pid, value = plan["p7"], plan["v7"]
    pname = W.name("person", pid)
    rows = _open_items(W, **{pcol: pid})
    text = _pick(rng, [
        "Set the {level} of every {item} in {scol} {open} whose {plink} is {p} to {v}.",
        "All of {p}'s {items} that are {open} should get {level} {v}. Leave their other {items} alone.",
        "{p} asked us to change each of their {items} with {scol} {open} to {level} {v}; please do that.",
    ], p=pname, v=value, **_labels(W))  # fmt: skip
    sing = item["singular"]
    st = item["state"]
    calls = [
        call(f"list_{person['plural']}", search=pname),
        call(f"list_{item['plural']}", **{pcol: pid, st["col"]: st["open"]}),
    ]
    calls += [
        call(f"update_{sing}", **{f"{sing}_id": r["id"], lcol: value})
        for r in rows
        if r[lcol] != value
    ]
    upd = {str(r["id"]): {lcol: value} for r in rows if r[lcol] != value}
    exp = _expect(updated={item["plural"]: upd}, ignore={item["plural"]: _ignore_item(item)})
    return {"task": text, "calls": calls, "final_answer": None, "expect": exp}


def _t8_handover(W: _World, plan: dict, rng: random.Random) -> dict:
    item, person = W["item"], W["person"]
    pcol, acol = W.link(item, "person")["col"], W.col(person, "active")
    pa, pb = plan["pa"], plan["pb"]
    aname, bname = W.name("person", pa), W.name("person", pb)
    rows = _open_items(W, **{pcol: pa})
    text = _pick(rng, [
        "{a} is leaving. Reassign each of their {items} in {scol} {open} to {b}, then deactivate {a}'s {person} account.",
        "Hand over all {items} of {a} that are {open} to {b}, and mark {a} as no longer active.",
        "{a} moves to another team: give every {item} of theirs that is still {open} to {b} and switch {a} to inactive.",
    ], a=aname, b=bname, **_labels(W))  # fmt: skip
    isg, psg = item["singular"], person["singular"]
    st = item["state"]
    calls = [call(f"list_{person['plural']}", search=aname), call(f"list_{person['plural']}", search=bname),
             call(f"list_{item['plural']}", **{pcol: pa, st["col"]: st["open"]})]  # fmt: skip
    calls += [call(f"update_{isg}", **{f"{isg}_id": r["id"], pcol: pb}) for r in rows]
    calls.append(call(f"update_{psg}", **{f"{psg}_id": pa, acol: False}))
    exp = _expect(
        updated={
            item["plural"]: {str(r["id"]): {pcol: pb} for r in rows},
            person["plural"]: {str(pa): {acol: 0}},
        },
        ignore={item["plural"]: _ignore_item(item), person["plural"]: ["updated_at"]},
    )
    return {"task": text, "calls": calls, "final_answer": None, "expect": exp}


def _t9_bulk_close(W: _World, plan: dict, rng: random.Random) -> dict:
    item, party, child = W["item"], W["party"], W["child"]
    xcol, lcol = W.link(item, "party")["col"], W.col(item, "level")
    st = item["state"]
    close = next(t for t in st["transitions"] if t["action"] == st["close"])
    x9, l9 = plan["x9"], plan["l9"]
    xname = W.name("party", x9)
    rows = _open_items(W, **{xcol: x9, lcol: l9})
    note = rng.choice(BULK_NOTES)
    text = _pick(rng, [
        "For every {item} of the {party} '{x}' with {scol} {open} and {level} {l}: add a {child} saying \"{b}\", then move it to {scol} {to}.",
        "Go through the {items} of the {party} '{x}' in {scol} {open} at {level} {l}. Each one gets a {child} \"{b}\" and is then moved to {to}.",
        "The {party} '{x}': each {item} of theirs that is {open} and has {level} {l} should be moved to {to}, with the {child} \"{b}\" added first.",
    ], x=xname, l=l9, b=note, act=close["action"].replace("_", " "), to=close["to"], **_labels(W))  # fmt: skip
    isg, csg = item["singular"], child["singular"]
    ccol, bcol = W.link(child, "item")["col"], W.col(child, "body")
    calls = [
        call(f"list_{party['plural']}", search=xname),
        call(f"list_{item['plural']}", **{xcol: x9, lcol: l9, st["col"]: st["open"]}),
    ]
    for r in rows:
        calls.append(call(f"create_{csg}", **{ccol: r["id"], bcol: note}))
        calls.append(call(f"{close['action']}_{isg}", **{f"{isg}_id": r["id"]}))
    exp = _expect(
        updated={item["plural"]: {str(r["id"]): {st["col"]: close["to"]} for r in rows}},
        created=[[child["plural"], {ccol: r["id"], bcol: note}] for r in rows],
        ignore={item["plural"]: _ignore_item(item)},
    )
    return {"task": text, "calls": calls, "final_answer": None, "expect": exp}
