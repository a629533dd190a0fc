"""FlowPilot: a workflow automation service (Zapier/n8n-like) over SQLite.

AWM-style environment of the helpdp project (scenario workflow_automation_1).
The authenticated user is user 1 (Alex Morgan, admin).
"""

import json
import os
import re
from datetime import datetime, timezone
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Column, ForeignKey, Integer, String, Text, create_engine, func, or_
from sqlalchemy.orm import declarative_base, sessionmaker

database_url = os.getenv("DATABASE_PATH", "sqlite:///outputs/databases/workflow_automation_1.db")

# one line: AWM's server rewrites each line holding the engine call to the episode's database
sqlite_args = {"check_same_thread": False} if database_url.startswith("sqlite") else {}
engine = create_engine(database_url, connect_args=sqlite_args)
SessionLocal = sessionmaker(bind=engine, autoflush=False, autocommit=False)

Base = declarative_base()

CURRENT_USER_ID = 1


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    username = Column(String, unique=True, nullable=False)
    email = Column(String, unique=True, nullable=False)
    full_name = Column(String, nullable=False)
    role = Column(String, nullable=False)
    is_active = Column(Integer, nullable=False, default=1)
    created_at = Column(String)


class App(Base):
    __tablename__ = "apps"
    id = Column(Integer, primary_key=True)
    slug = Column(String, unique=True, nullable=False)
    name = Column(String, nullable=False)
    category = Column(String, nullable=False)
    auth_type = Column(String, nullable=False)


class Connection(Base):
    __tablename__ = "connections"
    id = Column(Integer, primary_key=True)
    app_id = Column(Integer, ForeignKey("apps.id"), nullable=False)
    owner_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    name = Column(String, unique=True, nullable=False)
    account_label = Column(String)
    status = Column(String, nullable=False, default="active")
    created_at = Column(String)
    last_verified_at = Column(String)


class Folder(Base):
    __tablename__ = "folders"
    id = Column(Integer, primary_key=True)
    name = Column(String, unique=True, nullable=False)
    created_at = Column(String)


class Workflow(Base):
    __tablename__ = "workflows"
    id = Column(Integer, primary_key=True)
    name = Column(String, unique=True, nullable=False)
    description = Column(Text)
    folder_id = Column(Integer, ForeignKey("folders.id"))
    owner_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    status = Column(String, nullable=False, default="draft")
    created_at = Column(String)
    updated_at = Column(String)


class Trigger(Base):
    __tablename__ = "triggers"
    id = Column(Integer, primary_key=True)
    workflow_id = Column(Integer, ForeignKey("workflows.id"), unique=True, nullable=False)
    trigger_type = Column(String, nullable=False)
    app_id = Column(Integer, ForeignKey("apps.id"))
    connection_id = Column(Integer, ForeignKey("connections.id"))
    event = Column(String)
    cron_expression = Column(String)
    timezone = Column(String)
    webhook_path = Column(String)
    updated_at = Column(String)


class Step(Base):
    __tablename__ = "steps"
    id = Column(Integer, primary_key=True)
    workflow_id = Column(Integer, ForeignKey("workflows.id"), nullable=False)
    position = Column(Integer, nullable=False)
    name = Column(String, nullable=False)
    app_id = Column(Integer, ForeignKey("apps.id"), nullable=False)
    action = Column(String, nullable=False)
    connection_id = Column(Integer, ForeignKey("connections.id"))
    config_json = Column(Text, nullable=False, default="{}")
    on_error = Column(String, nullable=False, default="stop")
    max_retries = Column(Integer, nullable=False, default=0)


class Run(Base):
    __tablename__ = "runs"
    id = Column(Integer, primary_key=True)
    workflow_id = Column(Integer, ForeignKey("workflows.id"), nullable=False)
    status = Column(String, nullable=False)
    triggered_by = Column(String, nullable=False)
    retry_of_run_id = Column(Integer, ForeignKey("runs.id"))
    failed_step_id = Column(Integer, ForeignKey("steps.id"))
    error_message = Column(Text)
    started_at = Column(String, nullable=False)
    finished_at = Column(String)


class Approval(Base):
    __tablename__ = "approvals"
    id = Column(Integer, primary_key=True)
    run_id = Column(Integer, ForeignKey("runs.id"), nullable=False)
    step_id = Column(Integer, ForeignKey("steps.id"), nullable=False)
    approver_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    status = Column(String, nullable=False, default="pending")
    request_message = Column(Text, nullable=False)
    decision_comment = Column(Text)
    requested_at = Column(String, nullable=False)
    decided_at = Column(String)


class Variable(Base):
    __tablename__ = "variables"
    id = Column(Integer, primary_key=True)
    workflow_id = Column(Integer, ForeignKey("workflows.id"))
    key = Column(String, nullable=False)
    value = Column(Text, nullable=False)
    is_secret = Column(Integer, nullable=False, default=0)
    updated_at = Column(String)


Base.metadata.create_all(engine)

app = FastAPI(
    title="FlowPilot Workflow Automation API",
    version="1.0.0",
    description="Build, schedule and monitor automated workflows that connect SaaS apps.",
)


def now_str() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def get_or_404(session, model, obj_id: int, label: str):
    obj = session.get(model, obj_id)
    if obj is None:
        raise HTTPException(status_code=404, detail=f"{label} {obj_id} not found")
    return obj


# ---------------------------------------------------------------- schemas


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    username: str
    email: str
    full_name: str
    role: str
    is_active: bool


class AppOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    slug: str
    name: str
    category: str
    auth_type: str


class ConnectionOut(BaseModel):
    id: int
    app_id: int
    app_slug: str
    owner_id: int
    owner_name: str
    name: str
    account_label: str | None = None
    status: str
    created_at: str | None = None
    last_verified_at: str | None = None


class ConnectionUsage(BaseModel):
    workflow_id: int
    workflow_name: str
    used_in: str
    step_id: int | None = None


class ConnectionDetail(ConnectionOut):
    usages: list[ConnectionUsage]


class ConnectionCreate(BaseModel):
    app_id: int = Field(..., description="App to connect.")
    name: str = Field(..., min_length=1, max_length=80, description="Unique connection name.")
    account_label: str | None = Field(None, description="Account label shown in the UI.")
    owner_id: int | None = Field(None, description="Owner user ID; defaults to the current user.")


class FolderOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    name: str
    created_at: str | None = None


class FolderCreate(BaseModel):
    name: str = Field(..., min_length=1, max_length=80, description="Unique folder name.")


class TriggerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    trigger_type: str
    app_id: int | None = None
    connection_id: int | None = None
    event: str | None = None
    cron_expression: str | None = None
    timezone: str | None = None
    webhook_path: str | None = None
    updated_at: str | None = None


class StepOut(BaseModel):
    id: int
    workflow_id: int
    position: int
    name: str
    app_id: int
    app_slug: str
    action: str
    connection_id: int | None = None
    config: dict[str, Any]
    on_error: str
    max_retries: int


class WorkflowSummary(BaseModel):
    id: int
    name: str
    description: str | None = None
    folder_id: int | None = None
    folder_name: str | None = None
    owner_id: int
    owner_name: str
    status: str
    trigger_type: str | None = None
    step_count: int
    created_at: str | None = None
    updated_at: str | None = None


class WorkflowDetail(WorkflowSummary):
    trigger: TriggerOut | None = None
    steps: list[StepOut]


class WorkflowCreate(BaseModel):
    name: str = Field(..., min_length=1, max_length=120, description="Unique workflow name.")
    description: str | None = Field(None, description="What the workflow does.")
    folder_id: int | None = Field(None, description="Folder to place the workflow in.")


class WorkflowUpdate(BaseModel):
    name: str | None = Field(None, min_length=1, max_length=120, description="New unique name.")
    description: str | None = Field(None, description="New description.")
    folder_id: int | None = Field(None, description="Move to this folder.")
    owner_id: int | None = Field(None, description="Transfer ownership to this active user.")


class WorkflowDuplicate(BaseModel):
    new_name: str = Field(..., min_length=1, max_length=120, description="Name of the copy.")


class TriggerSet(BaseModel):
    trigger_type: Literal["schedule", "webhook", "app_event"] = Field(
        ..., description="Kind of trigger."
    )
    app_id: int | None = Field(None, description="App emitting the event (app_event).")
    connection_id: int | None = Field(None, description="Connection of that app (app_event).")
    event: str | None = Field(
        None, description="Event name (app_event), e.g. 'payment_intent.succeeded'."
    )
    cron_expression: str | None = Field(None, description="Five-field cron expression (schedule).")
    timezone: str | None = Field(None, description="IANA timezone (schedule); defaults to UTC.")
    webhook_path: str | None = Field(None, description="Path starting with /hooks/ (webhook).")


class StepCreate(BaseModel):
    name: str = Field(..., min_length=1, max_length=120, description="Step name.")
    app_id: int = Field(..., description="App performing the action.")
    action: str = Field(..., min_length=1, description="Action name, e.g. 'send_email'.")
    connection_id: int | None = Field(
        None, description="Connection for the app; required unless the app needs no auth."
    )
    config: dict[str, Any] | None = Field(None, description="Action configuration.")
    on_error: Literal["stop", "continue", "retry"] = Field("stop", description="Error policy.")
    max_retries: int = Field(0, ge=0, le=10, description="Retries when on_error is 'retry'.")
    position: int | None = Field(
        None, ge=1, description="1-based insert position; default appends at the end."
    )


class StepUpdate(BaseModel):
    name: str | None = Field(None, min_length=1, max_length=120, description="New name.")
    action: str | None = Field(None, min_length=1, description="New action.")
    connection_id: int | None = Field(
        None, description="New connection (must belong to the step's app)."
    )
    config: dict[str, Any] | None = Field(None, description="Replacement configuration.")
    on_error: Literal["stop", "continue", "retry"] | None = Field(
        None, description="New error policy."
    )
    max_retries: int | None = Field(None, ge=0, le=10, description="New retry count.")


class RunOut(BaseModel):
    id: int
    workflow_id: int
    workflow_name: str
    status: str
    triggered_by: str
    retry_of_run_id: int | None = None
    failed_step_id: int | None = None
    error_message: str | None = None
    started_at: str
    finished_at: str | None = None


class ApprovalOut(BaseModel):
    id: int
    run_id: int
    workflow_id: int
    workflow_name: str
    step_id: int
    approver_id: int
    approver_name: str
    status: str
    request_message: str
    decision_comment: str | None = None
    requested_at: str
    decided_at: str | None = None


class RunDetail(RunOut):
    approvals: list[ApprovalOut]


class ApprovalDecision(BaseModel):
    decision: Literal["approved", "rejected"] = Field(..., description="The decision.")
    comment: str | None = Field(None, max_length=500, description="Optional comment.")


class ApprovalReassign(BaseModel):
    approver_id: int = Field(..., description="Active user who should decide instead.")


class VariableOut(BaseModel):
    id: int
    workflow_id: int | None = None
    key: str
    value: str
    is_secret: bool
    updated_at: str | None = None


class VariableSet(BaseModel):
    key: str = Field(..., pattern=r"^[A-Z][A-Z0-9_]{0,63}$", description="Upper-case key.")
    value: str = Field(..., max_length=2000, description="Value to store.")
    workflow_id: int | None = Field(
        None, description="Workflow scope; omit for an account-wide variable."
    )
    is_secret: bool = Field(False, description="Mask the value in listings.")


class DeleteResult(BaseModel):
    deleted: bool
    id: int


# ---------------------------------------------------------------- helpers


def connection_out(session, c: Connection) -> ConnectionOut:
    a = session.get(App, c.app_id)
    u = session.get(User, c.owner_id)
    return ConnectionOut(
        id=c.id,
        app_id=c.app_id,
        app_slug=a.slug if a else "",
        owner_id=c.owner_id,
        owner_name=u.full_name if u else "",
        name=c.name,
        account_label=c.account_label,
        status=c.status,
        created_at=c.created_at,
        last_verified_at=c.last_verified_at,
    )


def step_out(session, s: Step) -> StepOut:
    a = session.get(App, s.app_id)
    return StepOut(
        id=s.id,
        workflow_id=s.workflow_id,
        position=s.position,
        name=s.name,
        app_id=s.app_id,
        app_slug=a.slug if a else "",
        action=s.action,
        connection_id=s.connection_id,
        config=json.loads(s.config_json or "{}"),
        on_error=s.on_error,
        max_retries=s.max_retries,
    )


def ordered_steps(session, workflow_id: int) -> list[Step]:
    return (
        session.query(Step)
        .filter(Step.workflow_id == workflow_id)
        .order_by(Step.position, Step.id)
        .all()
    )


def workflow_summary(session, w: Workflow) -> dict:
    folder = session.get(Folder, w.folder_id) if w.folder_id else None
    owner = session.get(User, w.owner_id)
    trig = session.query(Trigger).filter(Trigger.workflow_id == w.id).first()
    count = session.query(func.count(Step.id)).filter(Step.workflow_id == w.id).scalar()
    return dict(
        id=w.id,
        name=w.name,
        description=w.description,
        folder_id=w.folder_id,
        folder_name=folder.name if folder else None,
        owner_id=w.owner_id,
        owner_name=owner.full_name if owner else "",
        status=w.status,
        trigger_type=trig.trigger_type if trig else None,
        step_count=count or 0,
        created_at=w.created_at,
        updated_at=w.updated_at,
    )


def workflow_detail(session, w: Workflow) -> WorkflowDetail:
    trig = session.query(Trigger).filter(Trigger.workflow_id == w.id).first()
    return WorkflowDetail(
        **workflow_summary(session, w),
        trigger=TriggerOut.model_validate(trig) if trig else None,
        steps=[step_out(session, s) for s in ordered_steps(session, w.id)],
    )


def run_out(session, r: Run) -> RunOut:
    w = session.get(Workflow, r.workflow_id)
    return RunOut(
        id=r.id,
        workflow_id=r.workflow_id,
        workflow_name=w.name if w else "",
        status=r.status,
        triggered_by=r.triggered_by,
        retry_of_run_id=r.retry_of_run_id,
        failed_step_id=r.failed_step_id,
        error_message=r.error_message,
        started_at=r.started_at,
        finished_at=r.finished_at,
    )


def approval_out(session, a: Approval) -> ApprovalOut:
    r = session.get(Run, a.run_id)
    w = session.get(Workflow, r.workflow_id) if r else None
    u = session.get(User, a.approver_id)
    return ApprovalOut(
        id=a.id,
        run_id=a.run_id,
        workflow_id=w.id if w else 0,
        workflow_name=w.name if w else "",
        step_id=a.step_id,
        approver_id=a.approver_id,
        approver_name=u.full_name if u else "",
        status=a.status,
        request_message=a.request_message,
        decision_comment=a.decision_comment,
        requested_at=a.requested_at,
        decided_at=a.decided_at,
    )


def variable_out(v: Variable) -> VariableOut:
    return VariableOut(
        id=v.id,
        workflow_id=v.workflow_id,
        key=v.key,
        value="********" if v.is_secret else v.value,
        is_secret=bool(v.is_secret),
        updated_at=v.updated_at,
    )


def check_connection_for_app(session, connection_id: int, app_id: int) -> Connection:
    conn = get_or_404(session, Connection, connection_id, "Connection")
    if conn.app_id != app_id:
        raise HTTPException(
            status_code=400, detail=f"Connection {connection_id} belongs to another app"
        )
    if conn.status == "revoked":
        raise HTTPException(status_code=400, detail=f"Connection {connection_id} is revoked")
    return conn


def ensure_connections_active(session, w: Workflow) -> None:
    ids = [s.connection_id for s in ordered_steps(session, w.id) if s.connection_id]
    trig = session.query(Trigger).filter(Trigger.workflow_id == w.id).first()
    if trig and trig.connection_id:
        ids.append(trig.connection_id)
    for cid in ids:
        conn = session.get(Connection, cid)
        if conn is None or conn.status != "active":
            status = conn.status if conn else "missing"
            raise HTTPException(
                status_code=409,
                detail=f"Connection {cid} used by workflow '{w.name}' is {status}; fix it first",
            )


def editable_workflow(session, workflow_id: int) -> Workflow:
    w = get_or_404(session, Workflow, workflow_id, "Workflow")
    if w.status == "archived":
        raise HTTPException(status_code=409, detail="Archived workflows cannot be modified")
    return w


# ---------------------------------------------------------------- users & apps


@app.get(
    "/api/users",
    response_model=list[UserOut],
    operation_id="list_users",
    summary="List workspace users",
    description="List members of the workspace, optionally filtered by a name/email search, role or active flag.",
    tags=["users"],
)
def list_users(
    search: str | None = Query(
        None, description="Case-insensitive match on full name, username or email."
    ),
    role: Literal["admin", "editor", "viewer"] | None = Query(None, description="Filter by role."),
    is_active: bool | None = Query(None, description="Filter by active flag."),
) -> list[UserOut]:
    with SessionLocal() as session:
        q = session.query(User)
        if search:
            like = f"%{search}%"
            q = q.filter(
                or_(User.full_name.ilike(like), User.username.ilike(like), User.email.ilike(like))
            )
        if role:
            q = q.filter(User.role == role)
        if is_active is not None:
            q = q.filter(User.is_active == (1 if is_active else 0))
        return [UserOut.model_validate(u) for u in q.order_by(User.id).all()]


@app.post(
    "/api/users/{user_id}/deactivate",
    response_model=UserOut,
    operation_id="deactivate_user",
    summary="Deactivate a user",
    description="Deactivate a user account. Fails with 409 while the user still owns non-archived "
    "workflows or has pending approvals assigned.",
    tags=["users"],
)
def deactivate_user(user_id: int = Path(..., description="User to deactivate.")) -> UserOut:
    with SessionLocal() as session:
        u = get_or_404(session, User, user_id, "User")
        if not u.is_active:
            raise HTTPException(status_code=409, detail="User is already inactive")
        if user_id == CURRENT_USER_ID:
            raise HTTPException(status_code=400, detail="You cannot deactivate yourself")
        owned = (
            session.query(Workflow)
            .filter(Workflow.owner_id == user_id, Workflow.status != "archived")
            .count()
        )
        if owned:
            raise HTTPException(
                status_code=409, detail=f"User still owns {owned} non-archived workflow(s)"
            )
        pending = (
            session.query(Approval)
            .filter(Approval.approver_id == user_id, Approval.status == "pending")
            .count()
        )
        if pending:
            raise HTTPException(
                status_code=409, detail=f"User still has {pending} pending approval(s)"
            )
        u.is_active = 0
        session.commit()
        return UserOut.model_validate(u)


@app.get(
    "/api/apps",
    response_model=list[AppOut],
    operation_id="list_apps",
    summary="List available apps",
    description="List the integration catalog (apps usable in triggers and steps).",
    tags=["apps"],
)
def list_apps(
    category: str | None = Query(None, description="Filter by category, e.g. 'crm'."),
) -> list[AppOut]:
    with SessionLocal() as session:
        q = session.query(App)
        if category:
            q = q.filter(App.category == category)
        return [AppOut.model_validate(a) for a in q.order_by(App.id).all()]


# ---------------------------------------------------------------- connections


@app.get(
    "/api/connections",
    response_model=list[ConnectionOut],
    operation_id="list_connections",
    summary="List connections",
    description="List authenticated app connections, filtered by app slug, status, owner or name.",
    tags=["connections"],
)
def list_connections(
    app_slug: str | None = Query(None, description="Only connections of this app, e.g. 'slack'."),
    status: Literal["active", "expired", "revoked"] | None = Query(
        None, description="Filter by status."
    ),
    owner_id: int | None = Query(None, description="Only connections owned by this user."),
    search: str | None = Query(None, description="Case-insensitive match on the connection name."),
) -> list[ConnectionOut]:
    with SessionLocal() as session:
        q = session.query(Connection)
        if app_slug:
            q = q.join(App, App.id == Connection.app_id).filter(App.slug == app_slug)
        if status:
            q = q.filter(Connection.status == status)
        if owner_id is not None:
            q = q.filter(Connection.owner_id == owner_id)
        if search:
            q = q.filter(Connection.name.ilike(f"%{search}%"))
        return [connection_out(session, c) for c in q.order_by(Connection.id).all()]


@app.get(
    "/api/connections/{connection_id}",
    response_model=ConnectionDetail,
    operation_id="get_connection",
    summary="Get a connection",
    description="Get one connection with the triggers and steps that use it.",
    tags=["connections"],
)
def get_connection(
    connection_id: int = Path(..., description="Connection ID."),
) -> ConnectionDetail:
    with SessionLocal() as session:
        c = get_or_404(session, Connection, connection_id, "Connection")
        usages = []
        for t in session.query(Trigger).filter(Trigger.connection_id == c.id).order_by(Trigger.id):
            w = session.get(Workflow, t.workflow_id)
            usages.append(
                ConnectionUsage(workflow_id=w.id, workflow_name=w.name, used_in="trigger")
            )
        for s in session.query(Step).filter(Step.connection_id == c.id).order_by(Step.id):
            w = session.get(Workflow, s.workflow_id)
            usages.append(
                ConnectionUsage(
                    workflow_id=w.id,
                    workflow_name=w.name,
                    used_in=f"step {s.position}: {s.name}",
                    step_id=s.id,
                )
            )
        return ConnectionDetail(**connection_out(session, c).model_dump(), usages=usages)


@app.post(
    "/api/connections",
    response_model=ConnectionOut,
    status_code=201,
    operation_id="create_connection",
    summary="Create a connection",
    description="Authorize a new account for an app. Apps with auth_type 'none' need no connection.",
    tags=["connections"],
)
def create_connection(body: ConnectionCreate) -> ConnectionOut:
    with SessionLocal() as session:
        a = get_or_404(session, App, body.app_id, "App")
        if a.auth_type == "none":
            raise HTTPException(status_code=400, detail=f"App '{a.slug}' does not use connections")
        owner_id = body.owner_id or CURRENT_USER_ID
        owner = get_or_404(session, User, owner_id, "User")
        if not owner.is_active:
            raise HTTPException(status_code=400, detail="Owner must be an active user")
        if session.query(Connection).filter(Connection.name == body.name).first():
            raise HTTPException(
                status_code=409, detail=f"A connection named '{body.name}' already exists"
            )
        ts = now_str()
        c = Connection(
            app_id=a.id,
            owner_id=owner_id,
            name=body.name,
            account_label=body.account_label,
            status="active",
            created_at=ts,
            last_verified_at=ts,
        )
        session.add(c)
        session.commit()
        return connection_out(session, c)


@app.post(
    "/api/connections/{connection_id}/reauthorize",
    response_model=ConnectionOut,
    operation_id="reauthorize_connection",
    summary="Reauthorize a connection",
    description="Refresh the credentials of an active or expired connection. Revoked connections cannot be reauthorized.",
    tags=["connections"],
)
def reauthorize_connection(
    connection_id: int = Path(..., description="Connection ID."),
) -> ConnectionOut:
    with SessionLocal() as session:
        c = get_or_404(session, Connection, connection_id, "Connection")
        if c.status == "revoked":
            raise HTTPException(
                status_code=409,
                detail="Revoked connections cannot be reauthorized; create a new one",
            )
        c.status = "active"
        c.last_verified_at = now_str()
        session.commit()
        return connection_out(session, c)


@app.post(
    "/api/connections/{connection_id}/revoke",
    response_model=ConnectionOut,
    operation_id="revoke_connection",
    summary="Revoke a connection",
    description="Revoke the credentials of a connection. Workflows using it will fail until switched.",
    tags=["connections"],
)
def revoke_connection(
    connection_id: int = Path(..., description="Connection ID."),
) -> ConnectionOut:
    with SessionLocal() as session:
        c = get_or_404(session, Connection, connection_id, "Connection")
        if c.status == "revoked":
            raise HTTPException(status_code=409, detail="Connection is already revoked")
        c.status = "revoked"
        session.commit()
        return connection_out(session, c)


@app.delete(
    "/api/connections/{connection_id}",
    response_model=DeleteResult,
    operation_id="delete_connection",
    summary="Delete a connection",
    description="Delete a connection. Fails with 409 while any trigger or step still uses it.",
    tags=["connections"],
)
def delete_connection(connection_id: int = Path(..., description="Connection ID.")) -> DeleteResult:
    with SessionLocal() as session:
        c = get_or_404(session, Connection, connection_id, "Connection")
        used = session.query(Step).filter(Step.connection_id == c.id).count()
        used += session.query(Trigger).filter(Trigger.connection_id == c.id).count()
        if used:
            raise HTTPException(
                status_code=409, detail=f"Connection is still used by {used} trigger(s)/step(s)"
            )
        session.delete(c)
        session.commit()
        return DeleteResult(deleted=True, id=connection_id)


# ---------------------------------------------------------------- folders


@app.get(
    "/api/folders",
    response_model=list[FolderOut],
    operation_id="list_folders",
    summary="List folders",
    description="List all workflow folders.",
    tags=["folders"],
)
def list_folders() -> list[FolderOut]:
    with SessionLocal() as session:
        return [
            FolderOut.model_validate(f) for f in session.query(Folder).order_by(Folder.id).all()
        ]


@app.post(
    "/api/folders",
    response_model=FolderOut,
    status_code=201,
    operation_id="create_folder",
    summary="Create a folder",
    description="Create a new folder for organizing workflows.",
    tags=["folders"],
)
def create_folder(body: FolderCreate) -> FolderOut:
    with SessionLocal() as session:
        if session.query(Folder).filter(func.lower(Folder.name) == body.name.lower()).first():
            raise HTTPException(status_code=409, detail=f"Folder '{body.name}' already exists")
        f = Folder(name=body.name, created_at=now_str())
        session.add(f)
        session.commit()
        return FolderOut.model_validate(f)


# ---------------------------------------------------------------- workflows


@app.get(
    "/api/workflows",
    response_model=list[WorkflowSummary],
    operation_id="list_workflows",
    summary="List workflows",
    description="Search workflows by name/description and filter by status, folder or owner.",
    tags=["workflows"],
)
def list_workflows(
    search: str | None = Query(None, description="Case-insensitive match on name or description."),
    status: Literal["draft", "active", "paused", "archived"] | None = Query(
        None, description="Filter by status."
    ),
    folder_id: int | None = Query(None, description="Filter by folder."),
    owner_id: int | None = Query(None, description="Filter by owner."),
) -> list[WorkflowSummary]:
    with SessionLocal() as session:
        q = session.query(Workflow)
        if search:
            like = f"%{search}%"
            q = q.filter(or_(Workflow.name.ilike(like), Workflow.description.ilike(like)))
        if status:
            q = q.filter(Workflow.status == status)
        if folder_id is not None:
            q = q.filter(Workflow.folder_id == folder_id)
        if owner_id is not None:
            q = q.filter(Workflow.owner_id == owner_id)
        return [
            WorkflowSummary(**workflow_summary(session, w)) for w in q.order_by(Workflow.id).all()
        ]


@app.get(
    "/api/workflows/{workflow_id}",
    response_model=WorkflowDetail,
    operation_id="get_workflow",
    summary="Get a workflow",
    description="Get a workflow with its trigger and ordered steps.",
    tags=["workflows"],
)
def get_workflow(workflow_id: int = Path(..., description="Workflow ID.")) -> WorkflowDetail:
    with SessionLocal() as session:
        return workflow_detail(session, get_or_404(session, Workflow, workflow_id, "Workflow"))


@app.post(
    "/api/workflows",
    response_model=WorkflowDetail,
    status_code=201,
    operation_id="create_workflow",
    summary="Create a workflow",
    description="Create an empty draft workflow owned by the current user.",
    tags=["workflows"],
)
def create_workflow(body: WorkflowCreate) -> WorkflowDetail:
    with SessionLocal() as session:
        if session.query(Workflow).filter(Workflow.name == body.name).first():
            raise HTTPException(
                status_code=409, detail=f"A workflow named '{body.name}' already exists"
            )
        if body.folder_id is not None:
            get_or_404(session, Folder, body.folder_id, "Folder")
        ts = now_str()
        w = Workflow(
            name=body.name,
            description=body.description,
            folder_id=body.folder_id,
            owner_id=CURRENT_USER_ID,
            status="draft",
            created_at=ts,
            updated_at=ts,
        )
        session.add(w)
        session.commit()
        return workflow_detail(session, w)


@app.patch(
    "/api/workflows/{workflow_id}",
    response_model=WorkflowDetail,
    operation_id="update_workflow",
    summary="Update a workflow",
    description="Rename a workflow, change its description, move it to a folder or transfer ownership.",
    tags=["workflows"],
)
def update_workflow(
    body: WorkflowUpdate, workflow_id: int = Path(..., description="Workflow ID.")
) -> WorkflowDetail:
    with SessionLocal() as session:
        w = editable_workflow(session, workflow_id)
        if body.name is not None and body.name != w.name:
            if session.query(Workflow).filter(Workflow.name == body.name).first():
                raise HTTPException(
                    status_code=409, detail=f"A workflow named '{body.name}' already exists"
                )
            w.name = body.name
        if body.description is not None:
            w.description = body.description
        if body.folder_id is not None:
            get_or_404(session, Folder, body.folder_id, "Folder")
            w.folder_id = body.folder_id
        if body.owner_id is not None:
            owner = get_or_404(session, User, body.owner_id, "User")
            if not owner.is_active:
                raise HTTPException(status_code=400, detail="New owner must be an active user")
            if owner.role == "viewer":
                raise HTTPException(status_code=400, detail="Viewers cannot own workflows")
            w.owner_id = owner.id
        w.updated_at = now_str()
        session.commit()
        return workflow_detail(session, w)


@app.post(
    "/api/workflows/{workflow_id}/activate",
    response_model=WorkflowDetail,
    operation_id="activate_workflow",
    summary="Activate a workflow",
    description="Turn a draft or paused workflow on. Requires a trigger, at least one step and only "
    "active connections.",
    tags=["workflows"],
)
def activate_workflow(workflow_id: int = Path(..., description="Workflow ID.")) -> WorkflowDetail:
    with SessionLocal() as session:
        w = editable_workflow(session, workflow_id)
        if w.status == "active":
            raise HTTPException(status_code=409, detail="Workflow is already active")
        if session.query(Trigger).filter(Trigger.workflow_id == w.id).first() is None:
            raise HTTPException(status_code=409, detail="Workflow has no trigger")
        if not ordered_steps(session, w.id):
            raise HTTPException(status_code=409, detail="Workflow has no steps")
        ensure_connections_active(session, w)
        w.status = "active"
        w.updated_at = now_str()
        session.commit()
        return workflow_detail(session, w)


@app.post(
    "/api/workflows/{workflow_id}/pause",
    response_model=WorkflowDetail,
    operation_id="pause_workflow",
    summary="Pause a workflow",
    description="Pause an active workflow so that its trigger stops firing.",
    tags=["workflows"],
)
def pause_workflow(workflow_id: int = Path(..., description="Workflow ID.")) -> WorkflowDetail:
    with SessionLocal() as session:
        w = get_or_404(session, Workflow, workflow_id, "Workflow")
        if w.status != "active":
            raise HTTPException(
                status_code=409,
                detail=f"Only active workflows can be paused (status is {w.status})",
            )
        w.status = "paused"
        w.updated_at = now_str()
        session.commit()
        return workflow_detail(session, w)


@app.post(
    "/api/workflows/{workflow_id}/archive",
    response_model=WorkflowDetail,
    operation_id="archive_workflow",
    summary="Archive a workflow",
    description="Archive a draft or paused workflow (active workflows must be paused first).",
    tags=["workflows"],
)
def archive_workflow(workflow_id: int = Path(..., description="Workflow ID.")) -> WorkflowDetail:
    with SessionLocal() as session:
        w = get_or_404(session, Workflow, workflow_id, "Workflow")
        if w.status == "archived":
            raise HTTPException(status_code=409, detail="Workflow is already archived")
        if w.status == "active":
            raise HTTPException(status_code=409, detail="Pause the workflow before archiving it")
        w.status = "archived"
        w.updated_at = now_str()
        session.commit()
        return workflow_detail(session, w)


@app.post(
    "/api/workflows/{workflow_id}/duplicate",
    response_model=WorkflowDetail,
    status_code=201,
    operation_id="duplicate_workflow",
    summary="Duplicate a workflow",
    description="Copy a workflow's description, folder, trigger and steps into a new draft workflow "
    "owned by the current user. Variables are not copied.",
    tags=["workflows"],
)
def duplicate_workflow(
    body: WorkflowDuplicate, workflow_id: int = Path(..., description="Workflow to copy.")
) -> WorkflowDetail:
    with SessionLocal() as session:
        src = get_or_404(session, Workflow, workflow_id, "Workflow")
        if session.query(Workflow).filter(Workflow.name == body.new_name).first():
            raise HTTPException(
                status_code=409, detail=f"A workflow named '{body.new_name}' already exists"
            )
        ts = now_str()
        w = Workflow(
            name=body.new_name,
            description=src.description,
            folder_id=src.folder_id,
            owner_id=CURRENT_USER_ID,
            status="draft",
            created_at=ts,
            updated_at=ts,
        )
        session.add(w)
        session.flush()
        t = session.query(Trigger).filter(Trigger.workflow_id == src.id).first()
        if t:
            session.add(
                Trigger(
                    workflow_id=w.id,
                    trigger_type=t.trigger_type,
                    app_id=t.app_id,
                    connection_id=t.connection_id,
                    event=t.event,
                    cron_expression=t.cron_expression,
                    timezone=t.timezone,
                    webhook_path=t.webhook_path,
                    updated_at=ts,
                )
            )
        for s in ordered_steps(session, src.id):
            session.add(
                Step(
                    workflow_id=w.id,
                    position=s.position,
                    name=s.name,
                    app_id=s.app_id,
                    action=s.action,
                    connection_id=s.connection_id,
                    config_json=s.config_json,
                    on_error=s.on_error,
                    max_retries=s.max_retries,
                )
            )
        session.commit()
        return workflow_detail(session, w)


CRON_FIELD = re.compile(r"^[0-9*/,\-]+$")


@app.put(
    "/api/workflows/{workflow_id}/trigger",
    response_model=WorkflowDetail,
    operation_id="set_workflow_trigger",
    summary="Set the workflow trigger",
    description="Create or replace the trigger of a workflow. schedule needs cron_expression (and "
    "optionally timezone); app_event needs app_id, connection_id and event; webhook needs webhook_path.",
    tags=["workflows"],
)
def set_workflow_trigger(
    body: TriggerSet, workflow_id: int = Path(..., description="Workflow ID.")
) -> WorkflowDetail:
    with SessionLocal() as session:
        w = editable_workflow(session, workflow_id)
        values = dict(
            app_id=None,
            connection_id=None,
            event=None,
            cron_expression=None,
            timezone=None,
            webhook_path=None,
        )
        if body.trigger_type == "schedule":
            cron = (body.cron_expression or "").strip()
            fields = cron.split()
            if len(fields) != 5 or not all(CRON_FIELD.match(f) for f in fields):
                raise HTTPException(
                    status_code=400, detail="cron_expression must have five cron fields"
                )
            tz = body.timezone or "UTC"
            if tz != "UTC" and not re.match(r"^[A-Za-z]+/[A-Za-z_]+(/[A-Za-z_]+)?$", tz):
                raise HTTPException(status_code=400, detail=f"Unknown timezone '{tz}'")
            values.update(cron_expression=" ".join(fields), timezone=tz)
        elif body.trigger_type == "app_event":
            if body.app_id is None or body.connection_id is None or not body.event:
                raise HTTPException(
                    status_code=400,
                    detail="app_event triggers need app_id, connection_id and event",
                )
            a = get_or_404(session, App, body.app_id, "App")
            if a.auth_type == "none":
                raise HTTPException(status_code=400, detail=f"App '{a.slug}' does not emit events")
            check_connection_for_app(session, body.connection_id, a.id)
            values.update(app_id=a.id, connection_id=body.connection_id, event=body.event)
        else:
            path = body.webhook_path or ""
            if not re.match(r"^/hooks/[a-z0-9\-]+$", path):
                raise HTTPException(
                    status_code=400, detail="webhook_path must look like /hooks/<name>"
                )
            clash = (
                session.query(Trigger)
                .filter(Trigger.webhook_path == path, Trigger.workflow_id != w.id)
                .first()
            )
            if clash:
                raise HTTPException(
                    status_code=409, detail=f"Webhook path {path} is already in use"
                )
            values.update(webhook_path=path)
        t = session.query(Trigger).filter(Trigger.workflow_id == w.id).first()
        if t is None:
            t = Trigger(workflow_id=w.id, trigger_type=body.trigger_type)
            session.add(t)
        t.trigger_type = body.trigger_type
        for k, v in values.items():
            setattr(t, k, v)
        t.updated_at = w.updated_at = now_str()
        session.commit()
        return workflow_detail(session, w)


# ---------------------------------------------------------------- steps


@app.post(
    "/api/workflows/{workflow_id}/steps",
    response_model=WorkflowDetail,
    status_code=201,
    operation_id="add_workflow_step",
    summary="Add a step",
    description="Add a step to a workflow, at the end or at a given 1-based position (later steps shift down).",
    tags=["steps"],
)
def add_workflow_step(
    body: StepCreate, workflow_id: int = Path(..., description="Workflow ID.")
) -> WorkflowDetail:
    with SessionLocal() as session:
        w = editable_workflow(session, workflow_id)
        a = get_or_404(session, App, body.app_id, "App")
        if a.auth_type == "none":
            if body.connection_id is not None:
                raise HTTPException(
                    status_code=400, detail=f"App '{a.slug}' does not use connections"
                )
        else:
            if body.connection_id is None:
                raise HTTPException(
                    status_code=400, detail=f"App '{a.slug}' requires a connection_id"
                )
            check_connection_for_app(session, body.connection_id, a.id)
        steps = ordered_steps(session, w.id)
        position = body.position or len(steps) + 1
        if position > len(steps) + 1:
            raise HTTPException(
                status_code=400, detail=f"position must be between 1 and {len(steps) + 1}"
            )
        for s in steps:
            if s.position >= position:
                s.position += 1
        session.add(
            Step(
                workflow_id=w.id,
                position=position,
                name=body.name,
                app_id=a.id,
                action=body.action,
                connection_id=body.connection_id,
                config_json=json.dumps(body.config or {}, sort_keys=True),
                on_error=body.on_error,
                max_retries=body.max_retries,
            )
        )
        w.updated_at = now_str()
        session.commit()
        return workflow_detail(session, w)


@app.patch(
    "/api/steps/{step_id}",
    response_model=StepOut,
    operation_id="update_workflow_step",
    summary="Update a step",
    description="Change a step's name, action, connection, configuration or error policy.",
    tags=["steps"],
)
def update_workflow_step(
    body: StepUpdate, step_id: int = Path(..., description="Step ID.")
) -> StepOut:
    with SessionLocal() as session:
        s = get_or_404(session, Step, step_id, "Step")
        w = editable_workflow(session, s.workflow_id)
        if body.connection_id is not None:
            check_connection_for_app(session, body.connection_id, s.app_id)
            s.connection_id = body.connection_id
        if body.name is not None:
            s.name = body.name
        if body.action is not None:
            s.action = body.action
        if body.config is not None:
            s.config_json = json.dumps(body.config, sort_keys=True)
        if body.on_error is not None:
            s.on_error = body.on_error
        if body.max_retries is not None:
            s.max_retries = body.max_retries
        w.updated_at = now_str()
        session.commit()
        return step_out(session, s)


@app.delete(
    "/api/steps/{step_id}",
    response_model=DeleteResult,
    operation_id="delete_workflow_step",
    summary="Delete a step",
    description="Remove a step and renumber the remaining ones. Approval steps with approval history cannot be deleted.",
    tags=["steps"],
)
def delete_workflow_step(step_id: int = Path(..., description="Step ID.")) -> DeleteResult:
    with SessionLocal() as session:
        s = get_or_404(session, Step, step_id, "Step")
        w = editable_workflow(session, s.workflow_id)
        if session.query(Approval).filter(Approval.step_id == s.id).count():
            raise HTTPException(
                status_code=409, detail="Step has approval history and cannot be deleted"
            )
        for r in session.query(Run).filter(Run.failed_step_id == s.id):
            r.failed_step_id = None
        session.delete(s)
        session.flush()
        for i, other in enumerate(ordered_steps(session, w.id), start=1):
            other.position = i
        w.updated_at = now_str()
        session.commit()
        return DeleteResult(deleted=True, id=step_id)


# ---------------------------------------------------------------- runs


@app.get(
    "/api/runs",
    response_model=list[RunOut],
    operation_id="list_runs",
    summary="List runs",
    description="List workflow runs, newest first, filtered by workflow, status, trigger source or start time.",
    tags=["runs"],
)
def list_runs(
    workflow_id: int | None = Query(None, description="Only runs of this workflow."),
    status: Literal["queued", "running", "waiting_approval", "succeeded", "failed", "cancelled"]
    | None = Query(None, description="Filter by status."),
    triggered_by: str | None = Query(
        None, description="Filter by source: schedule, webhook, app_event, manual, retry."
    ),
    started_after: str | None = Query(
        None, description="Only runs started at or after this UTC time (YYYY-MM-DD[ HH:MM:SS])."
    ),
    started_before: str | None = Query(None, description="Only runs started before this UTC time."),
    limit: int = Query(50, ge=1, le=200, description="Maximum number of runs."),
) -> list[RunOut]:
    with SessionLocal() as session:
        q = session.query(Run)
        if workflow_id is not None:
            q = q.filter(Run.workflow_id == workflow_id)
        if status:
            q = q.filter(Run.status == status)
        if triggered_by:
            q = q.filter(Run.triggered_by == triggered_by)
        if started_after:
            q = q.filter(Run.started_at >= started_after)
        if started_before:
            q = q.filter(Run.started_at < started_before)
        rows = q.order_by(Run.started_at.desc(), Run.id.desc()).limit(limit).all()
        return [run_out(session, r) for r in rows]


@app.get(
    "/api/runs/{run_id}",
    response_model=RunDetail,
    operation_id="get_run",
    summary="Get a run",
    description="Get one run with its error details and approval requests.",
    tags=["runs"],
)
def get_run(run_id: int = Path(..., description="Run ID.")) -> RunDetail:
    with SessionLocal() as session:
        r = get_or_404(session, Run, run_id, "Run")
        approvals = (
            session.query(Approval).filter(Approval.run_id == r.id).order_by(Approval.id).all()
        )
        return RunDetail(
            **run_out(session, r).model_dump(),
            approvals=[approval_out(session, a) for a in approvals],
        )


def new_run(session, w: Workflow, triggered_by: str, retry_of: int | None = None) -> Run:
    if w.status != "active":
        raise HTTPException(
            status_code=409, detail=f"Workflow '{w.name}' is {w.status}, not active"
        )
    ensure_connections_active(session, w)
    r = Run(
        workflow_id=w.id,
        status="queued",
        triggered_by=triggered_by,
        retry_of_run_id=retry_of,
        started_at=now_str(),
    )
    session.add(r)
    session.commit()
    return r


@app.post(
    "/api/workflows/{workflow_id}/runs",
    response_model=RunOut,
    status_code=201,
    operation_id="trigger_workflow_run",
    summary="Run a workflow now",
    description="Queue a manual run of an active workflow whose connections are all active.",
    tags=["runs"],
)
def trigger_workflow_run(workflow_id: int = Path(..., description="Workflow ID.")) -> RunOut:
    with SessionLocal() as session:
        w = get_or_404(session, Workflow, workflow_id, "Workflow")
        return run_out(session, new_run(session, w, "manual"))


@app.post(
    "/api/runs/{run_id}/cancel",
    response_model=RunOut,
    operation_id="cancel_run",
    summary="Cancel a run",
    description="Cancel a queued, running or waiting run; its pending approvals are rejected.",
    tags=["runs"],
)
def cancel_run(run_id: int = Path(..., description="Run ID.")) -> RunOut:
    with SessionLocal() as session:
        r = get_or_404(session, Run, run_id, "Run")
        if r.status not in ("queued", "running", "waiting_approval"):
            raise HTTPException(
                status_code=409, detail=f"Run is {r.status} and cannot be cancelled"
            )
        ts = now_str()
        r.status = "cancelled"
        r.finished_at = ts
        for a in session.query(Approval).filter(
            Approval.run_id == r.id, Approval.status == "pending"
        ):
            a.status = "rejected"
            a.decision_comment = "Run cancelled"
            a.decided_at = ts
        session.commit()
        return run_out(session, r)


@app.post(
    "/api/runs/{run_id}/retry",
    response_model=RunOut,
    status_code=201,
    operation_id="retry_run",
    summary="Retry a failed run",
    description="Queue a new run that retries a failed run. The workflow must be active and all its connections active.",
    tags=["runs"],
)
def retry_run(run_id: int = Path(..., description="Failed run to retry.")) -> RunOut:
    with SessionLocal() as session:
        r = get_or_404(session, Run, run_id, "Run")
        if r.status != "failed":
            raise HTTPException(
                status_code=409, detail=f"Only failed runs can be retried (status is {r.status})"
            )
        w = session.get(Workflow, r.workflow_id)
        return run_out(session, new_run(session, w, "retry", retry_of=r.id))


# ---------------------------------------------------------------- approvals


@app.get(
    "/api/approvals",
    response_model=list[ApprovalOut],
    operation_id="list_approvals",
    summary="List approval requests",
    description="List approval requests filtered by status, approver or workflow.",
    tags=["approvals"],
)
def list_approvals(
    status: Literal["pending", "approved", "rejected"] | None = Query(
        None, description="Filter by status."
    ),
    approver_id: int | None = Query(None, description="Only requests assigned to this user."),
    workflow_id: int | None = Query(
        None, description="Only requests raised by runs of this workflow."
    ),
) -> list[ApprovalOut]:
    with SessionLocal() as session:
        q = session.query(Approval)
        if status:
            q = q.filter(Approval.status == status)
        if approver_id is not None:
            q = q.filter(Approval.approver_id == approver_id)
        if workflow_id is not None:
            q = q.join(Run, Run.id == Approval.run_id).filter(Run.workflow_id == workflow_id)
        return [approval_out(session, a) for a in q.order_by(Approval.id).all()]


@app.post(
    "/api/approvals/{approval_id}/decision",
    response_model=ApprovalOut,
    operation_id="decide_approval",
    summary="Approve or reject",
    description="Decide a pending approval. Approving resumes the run; rejecting cancels it.",
    tags=["approvals"],
)
def decide_approval(
    body: ApprovalDecision, approval_id: int = Path(..., description="Approval ID.")
) -> ApprovalOut:
    with SessionLocal() as session:
        a = get_or_404(session, Approval, approval_id, "Approval")
        if a.status != "pending":
            raise HTTPException(status_code=409, detail=f"Approval is already {a.status}")
        ts = now_str()
        a.status = body.decision
        a.decision_comment = body.comment
        a.decided_at = ts
        r = session.get(Run, a.run_id)
        if r is not None and r.status == "waiting_approval":
            if body.decision == "approved":
                r.status = "running"
            else:
                r.status = "cancelled"
                r.error_message = "Rejected by approver"
                r.finished_at = ts
        session.commit()
        return approval_out(session, a)


@app.post(
    "/api/approvals/{approval_id}/reassign",
    response_model=ApprovalOut,
    operation_id="reassign_approval",
    summary="Reassign an approval",
    description="Hand a pending approval request to another active, non-viewer user.",
    tags=["approvals"],
)
def reassign_approval(
    body: ApprovalReassign, approval_id: int = Path(..., description="Approval ID.")
) -> ApprovalOut:
    with SessionLocal() as session:
        a = get_or_404(session, Approval, approval_id, "Approval")
        if a.status != "pending":
            raise HTTPException(status_code=409, detail=f"Approval is already {a.status}")
        u = get_or_404(session, User, body.approver_id, "User")
        if not u.is_active or u.role == "viewer":
            raise HTTPException(
                status_code=400, detail="Approver must be an active admin or editor"
            )
        if u.id == a.approver_id:
            raise HTTPException(status_code=400, detail="Approval is already assigned to this user")
        a.approver_id = u.id
        session.commit()
        return approval_out(session, a)


# ---------------------------------------------------------------- variables


@app.get(
    "/api/variables",
    response_model=list[VariableOut],
    operation_id="list_variables",
    summary="List variables",
    description="List variables. Without filters returns all; use workflow_id for one workflow's "
    "variables or scope='global' for account-wide ones. Secret values are masked.",
    tags=["variables"],
)
def list_variables(
    workflow_id: int | None = Query(None, description="Only variables scoped to this workflow."),
    scope: Literal["all", "global", "workflow"] = Query(
        "all", description="all, global (account-wide) or workflow."
    ),
) -> list[VariableOut]:
    with SessionLocal() as session:
        q = session.query(Variable)
        if workflow_id is not None:
            q = q.filter(Variable.workflow_id == workflow_id)
        elif scope == "global":
            q = q.filter(Variable.workflow_id.is_(None))
        elif scope == "workflow":
            q = q.filter(Variable.workflow_id.is_not(None))
        return [variable_out(v) for v in q.order_by(Variable.id).all()]


@app.put(
    "/api/variables",
    response_model=VariableOut,
    operation_id="set_variable",
    summary="Create or update a variable",
    description="Set a variable by key: account-wide when workflow_id is omitted, otherwise scoped to that workflow. "
    "An existing variable with the same scope and key is overwritten.",
    tags=["variables"],
)
def set_variable(body: VariableSet) -> VariableOut:
    with SessionLocal() as session:
        if body.workflow_id is not None:
            editable_workflow(session, body.workflow_id)
        v = session.query(Variable).filter(Variable.key == body.key)
        v = (
            v.filter(Variable.workflow_id == body.workflow_id)
            if body.workflow_id is not None
            else v.filter(Variable.workflow_id.is_(None))
        )
        v = v.first()
        if v is None:
            v = Variable(workflow_id=body.workflow_id, key=body.key)
            session.add(v)
        v.value = body.value
        v.is_secret = 1 if body.is_secret else 0
        v.updated_at = now_str()
        session.commit()
        return variable_out(v)


@app.delete(
    "/api/variables/{variable_id}",
    response_model=DeleteResult,
    operation_id="delete_variable",
    summary="Delete a variable",
    description="Delete a variable by ID.",
    tags=["variables"],
)
def delete_variable(variable_id: int = Path(..., description="Variable ID.")) -> DeleteResult:
    with SessionLocal() as session:
        v = get_or_404(session, Variable, variable_id, "Variable")
        session.delete(v)
        session.commit()
        return DeleteResult(deleted=True, id=variable_id)


if __name__ == "__main__":
    import uvicorn

    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
