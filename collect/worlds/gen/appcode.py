"""Render a drawn world's SQLite DDL and its single-file FastAPI app (AWM's shape: SQLAlchemy
models over ``DATABASE_PATH``, one route per tool with an explicit ``operation_id``,
typed and described parameters, Pydantic request and response models)."""

from __future__ import annotations

from collect.worlds.gen.draw import articled, columns

# ---------------------------------------------------------------- DDL

_SQL_TYPE = {"int": "INTEGER", "bool": "INTEGER", "money": "REAL"}


def _q(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def ddl(world: dict) -> list[dict]:
    """``[{name, ddl, indexes}]`` in creation order (parents first)."""
    by_role = {e["role"]: e for e in world["entities"] if e["role"] != "extra"}
    tables = []
    for ent in world["entities"]:
        lines = ["    id INTEGER PRIMARY KEY"]
        for f in ent["fields"]:
            sql = f"    {f['col']} {_SQL_TYPE.get(f['kind'], 'TEXT')}"
            if not f["nullable"]:
                sql += " NOT NULL"
            if f["kind"] == "enum":
                sql += f" DEFAULT {_q(f['arg'][0])} CHECK ({f['col']} IN ({', '.join(_q(v) for v in f['arg'])}))"
            elif f["kind"] == "bool":
                sql += f" DEFAULT 0 CHECK ({f['col']} IN (0, 1))"
            if f["key"] in ("name", "email") and ent["role"] in (
                "person",
                "party",
                "group",
                "extra",
            ):
                sql += " UNIQUE"
            lines.append(sql)
        for link in ent["links"]:
            lines.append(f"    {link['col']} INTEGER" + ("" if link["nullable"] else " NOT NULL"))
        st = ent["state"]
        if st is not None:
            states = ", ".join(_q(s) for s in st["states"])
            lines.append(
                f"    {st['col']} TEXT NOT NULL DEFAULT {_q(st['initial'])} CHECK ({st['col']} IN ({states}))"
            )
        lines += [f"    {s} TEXT" for s in ent["stamps"]]
        lines.append("    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP")
        if ent["updated_at"]:
            lines.append("    updated_at TEXT")
        for link in ent["links"]:
            lines.append(
                f"    FOREIGN KEY ({link['col']}) REFERENCES {by_role[link['target']]['plural']}(id)"
            )
        indexes = [
            f"CREATE INDEX idx_{ent['plural']}_{link['col']} ON {ent['plural']}({link['col']});"
            for link in ent["links"]
        ]
        if st is not None:
            indexes.append(
                f"CREATE INDEX idx_{ent['plural']}_{st['col']} ON {ent['plural']}({st['col']});"
            )
        body = ",\n".join(lines)
        tables.append(
            {
                "name": ent["plural"],
                "ddl": f"CREATE TABLE {ent['plural']} (\n{body}\n);",
                "indexes": indexes,
            }
        )
    return tables


# ---------------------------------------------------------------- app

_PY_TYPE = {"int": "int", "bool": "bool", "money": "float"}
_ORM_TYPE = {"int": "Integer", "bool": "Integer", "money": "Float", "text": "Text"}


def _lit(values) -> str:
    return "Literal[" + ", ".join(repr(v) for v in values) + "]"


def _ptype(f: dict) -> str:
    if f["kind"] == "enum":
        return _lit(f["arg"])
    return _PY_TYPE.get(f["kind"], "str")


def _fdesc(f: dict, ent: dict) -> str:
    kind = f["kind"]
    if kind == "enum":
        return f"The {f['label']} of the {ent['label']}: one of {', '.join(f['arg'])}."
    if kind == "date":
        return f"The {f['label']} (YYYY-MM-DD)."
    if kind == "bool":
        return f"Whether the {ent['label']} is {f['label'].removeprefix('is ')}."
    if kind == "email":
        return f"Email address of the {ent['label']}."
    if kind == "money":
        return f"The {f['label']}, in USD."
    return f"The {f['label']} of the {ent['label']}."


def _models(world: dict, by_role: dict) -> list[str]:
    out = []
    for ent in world["entities"]:
        cls = ent["cls"]
        out += [
            "",
            "",
            f"class {cls}(Base):",
            f'    __tablename__ = "{ent["plural"]}"',
            "    id = Column(Integer, primary_key=True)",
        ]
        for f in ent["fields"]:
            out.append(
                f"    {f['col']} = Column({_ORM_TYPE.get(f['kind'], 'String')}, nullable={f['nullable']})"
            )
        for link in ent["links"]:
            target = by_role[link["target"]]["plural"]
            out.append(
                f'    {link["col"]} = Column(Integer, ForeignKey("{target}.id"), nullable={link["nullable"]})'
            )
        if ent["state"] is not None:
            st = ent["state"]
            out.append(
                f'    {st["col"]} = Column(String, nullable=False, default="{st["initial"]}")'
            )
        out += [f"    {s} = Column(String)" for s in ent["stamps"]]
        out.append("    created_at = Column(String)")
        if ent["updated_at"]:
            out.append("    updated_at = Column(String)")
    return out


def _schemas(ent: dict) -> list[str]:
    cls = ent["cls"]
    out = [
        "",
        "",
        f"class {cls}Out(BaseModel):",
        "    model_config = ConfigDict(from_attributes=True)",
        "    id: int",
    ]
    for f in ent["fields"]:
        t = _ptype(f) if f["kind"] != "enum" else "str"
        out.append(
            f"    {f['col']}: {t} | None = None" if f["nullable"] else f"    {f['col']}: {t}"
        )
    for link in ent["links"]:
        out.append(
            f"    {link['col']}: int | None = None"
            if link["nullable"]
            else f"    {link['col']}: int"
        )
    if ent["state"] is not None:
        out.append(f"    {ent['state']['col']}: str")
    out += [f"    {s}: str | None = None" for s in ent["stamps"]]
    out.append("    created_at: str | None = None")
    if ent["updated_at"]:
        out.append("    updated_at: str | None = None")
    out += [
        "",
        "",
        f"class {cls}Page(BaseModel):",
        "    total: int",
        "    limit: int",
        "    offset: int",
        f"    items: list[{cls}Out]",
    ]
    for mode in ("Create", "Update"):
        if mode == "Update" and "update" not in ent["ops"]:
            continue
        out += ["", "", f"class {cls}{mode}(BaseModel):"]
        for f in ent["fields"]:
            desc = _fdesc(f, ent)
            extra = ""
            if f["kind"] == "date":
                extra = ', pattern=r"^\\d{4}-\\d{2}-\\d{2}$"'
            elif f["kind"] == "email":
                extra = ', pattern=r"^[^@\\s]+@[^@\\s]+$"'
            elif f["kind"] not in ("int", "money", "bool", "enum"):
                extra = ", min_length=1, max_length=200"
            t = _ptype(f)
            if mode == "Update":
                out.append(f"    {f['col']}: {t} | None = Field(None{extra}, description={desc!r})")
            elif f["kind"] == "enum":
                out.append(f"    {f['col']}: {t} = Field({f['arg'][0]!r}, description={desc!r})")
            elif f["kind"] == "bool":
                out.append(
                    f"    {f['col']}: bool = Field({f['key'] == 'active'}, description={desc!r})"
                )
            elif f["nullable"]:
                out.append(f"    {f['col']}: {t} | None = Field(None{extra}, description={desc!r})")
            else:
                out.append(f"    {f['col']}: {t} = Field(...{extra}, description={desc!r})")
        for link in ent["links"]:
            desc = (
                f"ID of the {link['label']} ({link['target']}); see the list tool of that entity."
            )
            if mode == "Update" or link["nullable"]:
                out.append(f"    {link['col']}: int | None = Field(None, description={desc!r})")
            else:
                out.append(f"    {link['col']}: int = Field(..., description={desc!r})")
    return out


def _route(
    method: str,
    path: str,
    op: str,
    summary: str,
    desc: str,
    tag: str,
    response: str,
    status: int | None = None,
) -> str:
    summary, desc = articled(summary), articled(desc)
    status_s = f"\n    status_code={status}," if status else ""
    return (
        f'\n\n@app.{method}(\n    "{path}",\n    response_model={response},{status_s}\n    operation_id="{op}",\n'
        f"    summary={summary!r},\n    description={desc!r},\n    tags=[{tag!r}],\n)"
    )


def _check_links(ent: dict, by_role: dict, src: str, indent: str) -> list[str]:
    out = []
    for link in ent["links"]:
        target = by_role[link["target"]]
        out.append(f"{indent}if {src}.get({link['col']!r}) is not None:")
        out.append(
            f"{indent}    get_or_404(session, {target['cls']}, {src}[{link['col']!r}], {target['label'].capitalize()!r})"
        )
    return out


def _list_route(ent: dict, by_role: dict) -> list[str]:
    cls, plural, name = ent["cls"], ent["plural"], ent["fields"][0]["col"]
    params = [
        f'    search: str | None = Query(None, description="Case-insensitive match on the {ent["fields"][0]["label"]}."),'
    ]
    filters = [f'        if search:\n            q = q.filter({cls}.{name}.ilike(f"%{{search}}%"))']
    said = []
    for f in ent["fields"]:
        if f["kind"] == "enum":
            params.append(
                f'    {f["col"]}: {_lit(f["arg"])} | None = Query(None, description="Only {ent["plural_label"]} with this {f["label"]}."),'
            )
        elif f["kind"] == "bool":
            params.append(
                f'    {f["col"]}: bool | None = Query(None, description="Only {ent["plural_label"]} with this {f["label"]} flag."),'
            )
        else:
            continue
        said.append(f["label"])
        conv = f"int({f['col']})" if f["kind"] == "bool" else f["col"]
        filters.append(
            f"        if {f['col']} is not None:\n            q = q.filter({cls}.{f['col']} == {conv})"
        )
    for link in ent["links"]:
        target = by_role[link["target"]]
        params.append(
            f'    {link["col"]}: int | None = Query(None, description="Only {ent["plural_label"]} of this {target["label"]} (ID)."),'
        )
        filters.append(
            f"        if {link['col']} is not None:\n            q = q.filter({cls}.{link['col']} == {link['col']})"
        )
        said.append(link["label"])
    st = ent["state"]
    if st is not None:
        params.append(
            f'    {st["col"]}: {_lit(st["states"])} | None = Query(None, description="Only {ent["plural_label"]} in this {st["col"]}."),'
        )
        filters.append(
            f"        if {st['col']} is not None:\n            q = q.filter({cls}.{st['col']} == {st['col']})"
        )
        said.append(st["col"])
    params += [
        '    limit: int = Query(20, ge=1, le=100, description="Page size (at most 100)."),',
        '    offset: int = Query(0, ge=0, description="Rows to skip, for the next pages."),',
    ]
    by = f", filtered by {', '.join(said)}" if said else ""
    desc = f"List {ent['plural_label']} (oldest first) with a name search{by}; paginated with limit and offset, 'total' counts all matches."
    out = [
        _route(
            "get",
            f"/api/{plural}",
            f"list_{plural}",
            f"List {ent['plural_label']}",
            desc,
            plural,
            f"{cls}Page",
        )
    ]
    out.append(f"def list_{plural}(\n" + "\n".join(params) + f"\n) -> {cls}Page:")
    out.append(f"    with SessionLocal() as session:\n        q = session.query({cls})")
    out += filters
    out.append(
        f"        total = q.count()\n        rows = q.order_by({cls}.id).offset(offset).limit(limit).all()\n"
        f"        return {cls}Page(total=total, limit=limit, offset=offset, items=[{cls}Out.model_validate(r) for r in rows])"
    )
    return out


def _crud_routes(ent: dict, world: dict, by_role: dict) -> list[str]:
    cls, plural, sing, lab = ent["cls"], ent["plural"], ent["singular"], ent["label"]
    pid = f"{sing}_id"
    path_param = f'{pid}: int = Path(..., description="ID of the {lab}.")'
    out: list[str] = []
    if "list" in ent["ops"]:
        out += _list_route(ent, by_role)
    if "get" in ent["ops"]:
        out.append(
            _route(
                "get",
                f"/api/{plural}/{{{pid}}}",
                f"get_{sing}",
                f"Get a {lab}",
                f"Get one {lab} by ID with all its fields.",
                plural,
                f"{cls}Out",
            )
        )
        out.append(
            f"def get_{sing}({path_param}) -> {cls}Out:\n    with SessionLocal() as session:\n        return {cls}Out.model_validate(get_or_404(session, {cls}, {pid}, {lab.capitalize()!r}))"
        )
    unique = [
        f["col"]
        for f in ent["fields"]
        if f["key"] in ("name", "email") and ent["role"] in ("person", "party", "group", "extra")
    ]
    if "create" in ent["ops"]:
        st = ent["state"]
        initial = (
            f" New {ent['plural_label']} start in {st['col']} '{st['initial']}'." if st else ""
        )
        out.append(
            _route(
                "post",
                f"/api/{plural}",
                f"create_{sing}",
                f"Create a {lab}",
                f"Create a {lab}; returns it with its new ID.{initial}",
                plural,
                f"{cls}Out",
                201,
            )
        )
        out.append(
            f"def create_{sing}(body: {cls}Create) -> {cls}Out:\n    with SessionLocal() as session:\n        data = body.model_dump()"
        )
        out += _check_links(ent, by_role, "data", "        ")
        for col in unique:
            out.append(
                f"        if session.query({cls}).filter(func.lower({cls}.{col}) == data[{col!r}].strip().lower()).first():"
            )
            out.append(
                f'            raise HTTPException(status_code=409, detail=f"A {lab} with this {col} already exists")'
            )
        out.append(
            "        for k, v in data.items():\n            if isinstance(v, str):\n                data[k] = v.strip()\n            elif isinstance(v, bool):\n                data[k] = int(v)"
        )
        stamp = "created_at=now_str()" + (", updated_at=now_str()" if ent["updated_at"] else "")
        out.append(
            f"        row = {cls}(**data, {stamp})\n        session.add(row)\n        session.commit()\n        return {cls}Out.model_validate(row)"
        )
    if "update" in ent["ops"]:
        out.append(
            _route(
                "patch",
                f"/api/{plural}/{{{pid}}}",
                f"update_{sing}",
                f"Update a {lab}",
                f"Change fields of a {lab}; only the fields given are changed."
                + (
                    f" Its {ent['state']['col']} changes only through the dedicated actions."
                    if ent["state"]
                    else ""
                ),
                plural,
                f"{cls}Out",
            )
        )
        out.append(
            f'def update_{sing}(body: {cls}Update, {path_param}) -> {cls}Out:\n    with SessionLocal() as session:\n        row = get_or_404(session, {cls}, {pid}, {lab.capitalize()!r})\n        data = body.model_dump(exclude_none=True)\n        if not data:\n            raise HTTPException(status_code=400, detail="Nothing to change")'
        )
        out += _check_links(ent, by_role, "data", "        ")
        for col in unique:
            out.append(
                f"        if {col!r} in data and session.query({cls}).filter(func.lower({cls}.{col}) == data[{col!r}].strip().lower(), {cls}.id != row.id).first():"
            )
            out.append(
                f'            raise HTTPException(status_code=409, detail=f"A {lab} with this {col} already exists")'
            )
        out.append(
            "        for k, v in data.items():\n            setattr(row, k, int(v) if isinstance(v, bool) else v.strip() if isinstance(v, str) else v)"
        )
        if ent["updated_at"]:
            out.append("        row.updated_at = now_str()")
        out.append(f"        session.commit()\n        return {cls}Out.model_validate(row)")
    if "delete" in ent["ops"]:
        refs = [
            (e, link)
            for e in world["entities"]
            for link in e["links"]
            if link["target"] == ent["role"] and ent["role"] != "extra"
        ]
        out.append(
            _route(
                "delete",
                f"/api/{plural}/{{{pid}}}",
                f"delete_{sing}",
                f"Delete a {lab}",
                f"Delete a {lab}."
                + (" Fails with 409 while other records still refer to it." if refs else ""),
                plural,
                "DeleteResult",
            )
        )
        out.append(
            f"def delete_{sing}({path_param}) -> DeleteResult:\n    with SessionLocal() as session:\n        row = get_or_404(session, {cls}, {pid}, {lab.capitalize()!r})"
        )
        for e, link in refs:
            out.append(
                f"        n = session.query({e['cls']}).filter({e['cls']}.{link['col']} == row.id).count()"
            )
            out.append(
                f'        if n:\n            raise HTTPException(status_code=409, detail=f"{{n}} {e["plural_label"]} still refer to this {lab}")'
            )
        out.append(
            f"        session.delete(row)\n        session.commit()\n        return DeleteResult(deleted=True, id={pid})"
        )
    return out


def _transition_routes(ent: dict) -> list[str]:
    st = ent["state"]
    if st is None:
        return []
    cls, plural, sing, lab = ent["cls"], ent["plural"], ent["singular"], ent["label"]
    pid = f"{sing}_id"
    out = []
    for t in st["transitions"]:
        action = t["action"]
        froms = ", ".join(t["from"])
        desc = f"Move a {lab} to {st['col']} '{t['to']}'. Allowed from {froms}; any other {st['col']} gives 409."
        out.append(
            _route(
                "post",
                f"/api/{plural}/{{{pid}}}/{action}",
                f"{action}_{sing}",
                f"{action.replace('_', ' ').capitalize()} a {lab}",
                desc,
                plural,
                f"{cls}Out",
            )
        )
        out.append(
            f'def {action}_{sing}({pid}: int = Path(..., description="ID of the {lab}.")) -> {cls}Out:'
        )
        out.append(
            f"    with SessionLocal() as session:\n        row = get_or_404(session, {cls}, {pid}, {lab.capitalize()!r})"
        )
        out.append(f"        if row.{st['col']} not in {tuple(t['from'])!r}:")
        out.append(
            f'            raise HTTPException(status_code=409, detail=f"{lab.capitalize()} {{row.id}} is {{row.{st["col"]}}}; {action} needs {froms}")'
        )
        out.append(f"        row.{st['col']} = {t['to']!r}")
        if t["stamp"]:
            out.append(f"        row.{t['stamp']} = now_str()")
        if ent["updated_at"]:
            out.append("        row.updated_at = now_str()")
        out.append(f"        session.commit()\n        return {cls}Out.model_validate(row)")
    return out


def _distractor_routes(world: dict, by_role: dict) -> list[str]:
    item, party = by_role["item"], by_role["party"]
    out = []
    for d in world["distractors"]:
        if d in ("summary_level", "summary_state"):
            col = item["fields"][1]["col"] if d == "summary_level" else item["state"]["col"]
            col = (
                next(f["col"] for f in item["fields"] if f["key"] == "level")
                if d == "summary_level"
                else col
            )
            op = f"count_{item['plural']}_by_{col}"
            out.append(
                _route(
                    "get",
                    f"/api/reports/{item['plural']}-by-{col}",
                    op,
                    f"Count {item['plural_label']} by {col}",
                    f"Number of {item['plural_label']} per {col.replace('_', ' ')}.",
                    "reports",
                    "CountReport",
                )
            )
            out.append(
                f"def {op}() -> CountReport:\n    with SessionLocal() as session:\n        rows = session.query({item['cls']}.{col}, func.count({item['cls']}.id)).group_by({item['cls']}.{col}).all()\n        return CountReport(group_by={col!r}, counts={{str(k): n for k, n in sorted(rows)}})"
            )
        elif d == "overview":
            out.append(
                _route(
                    "get",
                    "/api/overview",
                    "get_workspace_overview",
                    "Workspace overview",
                    f"Record counts of every table of {world['app']}.",
                    "reports",
                    "CountReport",
                )
            )
            counts = ", ".join(
                f"{e['plural']!r}: session.query({e['cls']}).count()" for e in world["entities"]
            )
            out.append(
                f"def get_workspace_overview() -> CountReport:\n    with SessionLocal() as session:\n        return CountReport(group_by='table', counts={{{counts}}})"
            )
        elif d == "export_party":
            op = f"export_{party['plural']}_csv"
            cols = columns(party)
            out.append(
                _route(
                    "get",
                    f"/api/exports/{party['plural']}.csv",
                    op,
                    f"Export {party['plural_label']} as CSV",
                    f"All {party['plural_label']} as CSV text (a header line, then one line per {party['label']}).",
                    "reports",
                    "CsvExport",
                )
            )
            out.append(
                f"def {op}() -> CsvExport:\n    with SessionLocal() as session:\n        cols = {cols!r}\n        lines = [','.join(cols)]\n        for r in session.query({party['cls']}).order_by({party['cls']}.id):\n            lines.append(','.join('' if getattr(r, c) is None else str(getattr(r, c)).replace(',', ' ') for c in cols))\n        return CsvExport(rows=len(lines) - 1, csv='\\n'.join(lines))"
            )
    return out


HEADER = '''"""{app}: {what}, over SQLite.

Generated AWM-style environment (helpdp world generator; family {family}, scenario {scenario}).
"""

import os
from datetime import datetime, timezone
from typing import Literal

from fastapi import FastAPI, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Column, Float, ForeignKey, Integer, String, Text, create_engine, func
from sqlalchemy.orm import declarative_base, sessionmaker

database_url = os.getenv("DATABASE_PATH", "sqlite:///outputs/databases/{scenario}.db")
engine = create_engine(database_url, connect_args={{"check_same_thread": False}})
SessionLocal = sessionmaker(bind=engine, autoflush=False, autocommit=False)
Base = declarative_base()
_ = (Float, Text, Literal)'''

HELPERS = """

class DeleteResult(BaseModel):
    deleted: bool
    id: int


class CountReport(BaseModel):
    group_by: str
    counts: dict[str, int]


class CsvExport(BaseModel):
    rows: int
    csv: str


def now_str() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def get_or_404(session, model, obj_id: int, label: str):
    obj = session.get(model, obj_id)
    if obj is None:
        raise HTTPException(status_code=404, detail=f"{label} {obj_id} not found")
    return obj"""


def app_code(world: dict) -> str:
    by_role = {e["role"]: e for e in world["entities"] if e["role"] != "extra"}
    out = [HEADER.format(**world)]
    out += _models(world, by_role)
    out.append("\n\nBase.metadata.create_all(engine)\n")
    out.append(
        f"app = FastAPI(\n    title={world['app'] + ' API'!r},\n    version='1.0.0',\n    description={world['what'][0].upper() + world['what'][1:] + '.'!r},\n)"
    )
    out.append(HELPERS)
    for ent in world["entities"]:
        out += _schemas(ent)
    for ent in world["entities"]:
        out.append(
            f"\n\n# ---------------------------------------------------------------- {ent['plural']}"
        )
        out += _crud_routes(ent, world, by_role)
        out += _transition_routes(ent)
    if world["distractors"]:
        out.append("\n\n# ---------------------------------------------------------------- reports")
        out += _distractor_routes(world, by_role)
    return "\n".join(out).rstrip("\n") + "\n"
