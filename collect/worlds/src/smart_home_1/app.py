"""HearthHub: a smart home hub (rooms, devices, scenes, automations, energy, alerts, guests) over SQLite.

AWM-style environment of the helpdp project (scenario smart_home_1). The caller is user 1
(Jordan Rivera, the home owner).
"""

import os
import re
from datetime import datetime, timezone
from typing import Literal

from fastapi import FastAPI, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Column, Float, ForeignKey, Integer, String, Text, create_engine, func
from sqlalchemy.orm import declarative_base, sessionmaker

database_url = os.getenv("DATABASE_PATH", "sqlite:///outputs/databases/smart_home_1.db")

# one line: AWM's server rewrites each line holding the engine call to the episode's database
sqlite_args = {"check_same_thread": False} if database_url.startswith("sqlite") else {}
engine = create_engine(database_url, connect_args=sqlite_args)
SessionLocal = sessionmaker(bind=engine, autoflush=False, autocommit=False)

Base = declarative_base()

CURRENT_USER_ID = 1


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False)
    email = Column(String, unique=True, nullable=False)
    role = Column(String, nullable=False)
    created_at = Column(String)


class Room(Base):
    __tablename__ = "rooms"
    id = Column(Integer, primary_key=True)
    name = Column(String, unique=True, nullable=False)
    floor = Column(Integer, nullable=False)


class Device(Base):
    __tablename__ = "devices"
    id = Column(Integer, primary_key=True)
    name = Column(String, unique=True, nullable=False)
    room_id = Column(Integer, ForeignKey("rooms.id"), nullable=False)
    device_type = Column(String, nullable=False)
    manufacturer = Column(String, nullable=False)
    model = Column(String, nullable=False)
    status = Column(String, nullable=False, default="online")
    is_on = Column(Integer)
    brightness = Column(Integer)
    color_temp_k = Column(Integer)
    target_temp_c = Column(Float)
    current_temp_c = Column(Float)
    hvac_mode = Column(String)
    is_locked = Column(Integer)
    position = Column(Integer)
    battery_level = Column(Integer)
    sensor_kind = Column(String)
    firmware_version = Column(String)
    last_seen_at = Column(String)


class Scene(Base):
    __tablename__ = "scenes"
    id = Column(Integer, primary_key=True)
    name = Column(String, unique=True, nullable=False)
    description = Column(Text)
    created_by = Column(Integer, ForeignKey("users.id"), nullable=False)
    created_at = Column(String)
    last_activated_at = Column(String)


class SceneAction(Base):
    __tablename__ = "scene_actions"
    id = Column(Integer, primary_key=True)
    scene_id = Column(Integer, ForeignKey("scenes.id"), nullable=False)
    device_id = Column(Integer, ForeignKey("devices.id"), nullable=False)
    action = Column(String, nullable=False)
    value = Column(Float)


class Automation(Base):
    __tablename__ = "automations"
    id = Column(Integer, primary_key=True)
    name = Column(String, unique=True, nullable=False)
    trigger_type = Column(String, nullable=False)
    trigger_time = Column(String)
    days = Column(String, nullable=False, default="daily")
    trigger_device_id = Column(Integer, ForeignKey("devices.id"))
    trigger_event = Column(String)
    scene_id = Column(Integer, ForeignKey("scenes.id"), nullable=False)
    is_enabled = Column(Integer, nullable=False, default=1)
    last_triggered_at = Column(String)


class EnergyReading(Base):
    __tablename__ = "energy_readings"
    id = Column(Integer, primary_key=True)
    device_id = Column(Integer, ForeignKey("devices.id"), nullable=False)
    reading_date = Column(String, nullable=False)
    kwh = Column(Float, nullable=False)


class Alert(Base):
    __tablename__ = "alerts"
    id = Column(Integer, primary_key=True)
    device_id = Column(Integer, ForeignKey("devices.id"), nullable=False)
    alert_type = Column(String, nullable=False)
    severity = Column(String, nullable=False)
    message = Column(Text, nullable=False)
    status = Column(String, nullable=False, default="open")
    created_at = Column(String, nullable=False)
    acknowledged_by = Column(Integer, ForeignKey("users.id"))
    note = Column(Text)
    resolved_at = Column(String)


class GuestAccess(Base):
    __tablename__ = "guest_access"
    id = Column(Integer, primary_key=True)
    guest_name = Column(String, nullable=False)
    guest_email = Column(String)
    lock_device_id = Column(Integer, ForeignKey("devices.id"), nullable=False)
    access_code = Column(String, nullable=False)
    valid_from = Column(String, nullable=False)
    valid_until = Column(String, nullable=False)
    status = Column(String, nullable=False, default="active")
    created_by = Column(Integer, ForeignKey("users.id"), nullable=False)
    created_at = Column(String)


Base.metadata.create_all(engine)

app = FastAPI(
    title="HearthHub Smart Home API",
    version="1.0.0",
    description="Control devices, scenes and automations of the home, watch energy use and alerts, manage guest codes.",
)

ACTIONS_BY_TYPE = {
    "light": {"turn_on", "turn_off", "set_brightness"},
    "plug": {"turn_on", "turn_off"},
    "speaker": {"turn_on", "turn_off"},
    "camera": {"turn_on", "turn_off"},
    "thermostat": {"set_temperature"},
    "lock": {"lock", "unlock"},
    "blind": {"set_position"},
    "sensor": set(),
}
VALUE_RANGES = {"set_brightness": (1, 100), "set_temperature": (10, 30), "set_position": (0, 100)}
STATE_FIELDS = {
    "light": {"is_on", "brightness", "color_temp_k"},
    "plug": {"is_on"},
    "speaker": {"is_on"},
    "camera": {"is_on"},
    "thermostat": {"target_temp_c", "hvac_mode"},
    "blind": {"position"},
}
EVENT_SENSOR = {
    "motion_detected": "motion",
    "door_opened": "contact",
    "leak_detected": "leak",
    "smoke_detected": "smoke",
}
DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def now_str() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def get_or_404(session, model, obj_id: int, label: str):
    obj = session.get(model, obj_id)
    if obj is None:
        raise HTTPException(status_code=404, detail=f"{label} {obj_id} not found")
    return obj


# ---------------------------------------------------------------- schemas


class RoomOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    name: str
    floor: int


class RoomCreate(BaseModel):
    name: str = Field(..., min_length=1, max_length=60, description="Unique room name.")
    floor: int = Field(
        ..., ge=-2, le=5, description="Floor: -1 basement, 0 ground floor, 1 upstairs."
    )


class DeviceOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    name: str
    room_id: int
    device_type: str
    manufacturer: str
    model: str
    status: str
    is_on: bool | None = None
    brightness: int | None = None
    color_temp_k: int | None = None
    target_temp_c: float | None = None
    current_temp_c: float | None = None
    hvac_mode: str | None = None
    is_locked: bool | None = None
    position: int | None = None
    battery_level: int | None = None
    sensor_kind: str | None = None
    firmware_version: str | None = None
    last_seen_at: str | None = None


class DeviceDetail(DeviceOut):
    room_name: str
    floor: int
    open_alerts: int
    scene_ids: list[int]


class DeviceUpdate(BaseModel):
    name: str | None = Field(
        None, min_length=1, max_length=80, description="New unique device name."
    )
    room_id: int | None = Field(None, description="Move the device to this room.")


class DeviceStateSet(BaseModel):
    is_on: bool | None = Field(None, description="Power (lights, plugs, speakers, cameras).")
    brightness: int | None = Field(
        None, ge=1, le=100, description="Brightness % (lights; also turns them on)."
    )
    color_temp_k: int | None = Field(
        None, ge=2200, le=6500, description="Color temperature in kelvin (lights)."
    )
    target_temp_c: float | None = Field(
        None, ge=10, le=30, description="Target temperature in C (thermostats)."
    )
    hvac_mode: Literal["heat", "cool", "auto", "off"] | None = Field(
        None, description="Mode (thermostats)."
    )
    position: int | None = Field(
        None, ge=0, le=100, description="Blind position, 0 closed to 100 open."
    )


class ActionIn(BaseModel):
    device_id: int = Field(..., description="Device to control.")
    action: Literal[
        "turn_on", "turn_off", "set_brightness", "set_temperature", "lock", "unlock", "set_position"
    ] = Field(..., description="What to do with the device.")
    value: float | None = Field(
        None,
        description="Brightness % (set_brightness), C (set_temperature) or position % (set_position).",
    )


class ActionOut(BaseModel):
    id: int
    device_id: int
    device_name: str
    action: str
    value: float | None = None


class SceneOut(BaseModel):
    id: int
    name: str
    description: str | None = None
    created_by: int
    last_activated_at: str | None = None
    actions: list[ActionOut]


class SceneDetail(SceneOut):
    automation_ids: list[int]


class SceneCreate(BaseModel):
    name: str = Field(..., min_length=1, max_length=80, description="Unique scene name.")
    description: str | None = Field(None, description="What the scene does.")
    actions: list[ActionIn] = Field(
        default_factory=list, description="Device actions (one per device)."
    )


class ActivationResult(BaseModel):
    scene: SceneOut
    applied_device_ids: list[int]
    skipped_offline_device_ids: list[int]


class AutomationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    name: str
    trigger_type: str
    trigger_time: str | None = None
    days: str
    trigger_device_id: int | None = None
    trigger_event: str | None = None
    scene_id: int
    is_enabled: bool
    last_triggered_at: str | None = None


class AutomationCreate(BaseModel):
    name: str = Field(..., min_length=1, max_length=80, description="Unique automation name.")
    trigger_type: Literal["time", "sunrise", "sunset", "device_event"] = Field(
        ..., description="Trigger kind."
    )
    trigger_time: str | None = Field(
        None, description="HH:MM, 24h local time (time triggers only)."
    )
    days: str = Field(
        "daily", description="'daily', 'weekdays', 'weekends' or a list like 'mon,wed,fri'."
    )
    trigger_device_id: int | None = Field(
        None, description="Sensor that fires the automation (device_event)."
    )
    trigger_event: (
        Literal["motion_detected", "door_opened", "leak_detected", "smoke_detected"] | None
    ) = Field(None, description="Sensor event (device_event).")
    scene_id: int = Field(..., description="Scene to run.")
    is_enabled: bool = Field(True, description="Whether the automation is active.")


class AutomationUpdate(BaseModel):
    name: str | None = Field(None, min_length=1, max_length=80, description="New name.")
    trigger_time: str | None = Field(None, description="New HH:MM (time triggers).")
    days: str | None = Field(None, description="New days specification.")
    scene_id: int | None = Field(None, description="New scene to run.")
    is_enabled: bool | None = Field(None, description="Enable or disable.")


class EnergyRow(BaseModel):
    key: str
    label: str
    kwh: float


class EnergyReport(BaseModel):
    start_date: str
    end_date: str
    group_by: str
    total_kwh: float
    rows: list[EnergyRow]


class AlertOut(BaseModel):
    id: int
    device_id: int
    device_name: str
    room_name: str
    alert_type: str
    severity: str
    message: str
    status: str
    created_at: str
    acknowledged_by: int | None = None
    note: str | None = None
    resolved_at: str | None = None


class AlertNote(BaseModel):
    note: str | None = Field(
        None, max_length=300, description="Optional note saved with the alert."
    )


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    name: str
    email: str
    role: str


class GuestAccessOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    guest_name: str
    guest_email: str | None = None
    lock_device_id: int
    access_code: str
    valid_from: str
    valid_until: str
    status: str
    created_by: int


class GuestAccessCreate(BaseModel):
    guest_name: str = Field(..., min_length=1, max_length=80, description="Guest's name.")
    guest_email: str | None = Field(None, description="Guest's email for the invitation.")
    lock_device_id: int = Field(..., description="Lock the code opens.")
    access_code: str = Field(..., pattern=r"^\d{4,8}$", description="4-8 digit keypad code.")
    valid_from: str = Field(..., description="Start, 'YYYY-MM-DD HH:MM' local time.")
    valid_until: str = Field(..., description="End, 'YYYY-MM-DD HH:MM' local time.")


class DeleteResult(BaseModel):
    deleted: bool
    id: int


# ---------------------------------------------------------------- helpers


def parse_minute(value: str, label: str) -> str:
    text = value.strip().replace("T", " ")
    for fmt in ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(text, fmt).strftime("%Y-%m-%d %H:%M")
        except ValueError:
            continue
    raise HTTPException(status_code=400, detail=f"{label} must look like 'YYYY-MM-DD HH:MM'")


def parse_day(value: str, label: str) -> str:
    try:
        return datetime.strptime(value, "%Y-%m-%d").strftime("%Y-%m-%d")
    except ValueError as exc:
        raise HTTPException(status_code=400, detail=f"{label} must look like 'YYYY-MM-DD'") from exc


def check_time(value: str | None) -> str:
    if value is None or not re.match(r"^([01]\d|2[0-3]):[0-5]\d$", value):
        raise HTTPException(status_code=400, detail="trigger_time must be HH:MM (24h)")
    return value


def check_days(value: str) -> str:
    v = value.strip().lower().replace(" ", "")
    if v in ("daily", "weekdays", "weekends"):
        return v
    parts = v.split(",")
    if not parts or any(p not in DAY_NAMES for p in parts) or len(set(parts)) != len(parts):
        raise HTTPException(
            status_code=400, detail="days must be daily, weekdays, weekends or e.g. 'mon,wed'"
        )
    return ",".join(sorted(parts, key=DAY_NAMES.index))


def check_action(device: Device, action: str, value: float | None) -> float | None:
    if action not in ACTIONS_BY_TYPE[device.device_type]:
        raise HTTPException(
            status_code=400,
            detail=f"'{action}' is not supported by {device.device_type} '{device.name}'",
        )
    if action in VALUE_RANGES:
        lo, hi = VALUE_RANGES[action]
        if value is None or not lo <= value <= hi:
            raise HTTPException(
                status_code=400, detail=f"{action} needs a value between {lo} and {hi}"
            )
        return float(value)
    if value is not None:
        raise HTTPException(status_code=400, detail=f"{action} takes no value")
    return None


def apply_action(device: Device, action: str, value: float | None) -> None:
    if action in ("turn_on", "turn_off"):
        device.is_on = 1 if action == "turn_on" else 0
    elif action == "set_brightness":
        device.is_on, device.brightness = 1, int(value)
    elif action == "set_temperature":
        device.target_temp_c = value
    elif action in ("lock", "unlock"):
        device.is_locked = 1 if action == "lock" else 0
    elif action == "set_position":
        device.position = int(value)


def device_detail(session, d: Device) -> DeviceDetail:
    room = session.get(Room, d.room_id)
    alerts = (
        session.query(Alert).filter(Alert.device_id == d.id, Alert.status != "resolved").count()
    )
    scene_ids = [
        sid for (sid,) in session.query(SceneAction.scene_id).filter(SceneAction.device_id == d.id)
    ]
    return DeviceDetail(
        **DeviceOut.model_validate(d).model_dump(),
        room_name=room.name,
        floor=room.floor,
        open_alerts=alerts,
        scene_ids=sorted(scene_ids),
    )


def scene_out(session, s: Scene, detail: bool = False):
    actions = []
    for a in (
        session.query(SceneAction).filter(SceneAction.scene_id == s.id).order_by(SceneAction.id)
    ):
        d = session.get(Device, a.device_id)
        actions.append(
            ActionOut(
                id=a.id, device_id=a.device_id, device_name=d.name, action=a.action, value=a.value
            )
        )
    data = dict(
        id=s.id,
        name=s.name,
        description=s.description,
        created_by=s.created_by,
        last_activated_at=s.last_activated_at,
        actions=actions,
    )
    if not detail:
        return SceneOut(**data)
    autos = session.query(Automation.id).filter(Automation.scene_id == s.id).order_by(Automation.id)
    return SceneDetail(**data, automation_ids=[a for (a,) in autos])


def add_action(session, scene: Scene, item: ActionIn) -> None:
    d = get_or_404(session, Device, item.device_id, "Device")
    value = check_action(d, item.action, item.value)
    exists = (
        session.query(SceneAction)
        .filter(SceneAction.scene_id == scene.id, SceneAction.device_id == d.id)
        .first()
    )
    if exists:
        raise HTTPException(status_code=409, detail=f"Scene already has an action for '{d.name}'")
    session.add(SceneAction(scene_id=scene.id, device_id=d.id, action=item.action, value=value))
    session.flush()


def alert_out(session, a: Alert) -> AlertOut:
    d = session.get(Device, a.device_id)
    return AlertOut(
        id=a.id,
        device_id=a.device_id,
        device_name=d.name,
        room_name=session.get(Room, d.room_id).name,
        alert_type=a.alert_type,
        severity=a.severity,
        message=a.message,
        status=a.status,
        created_at=a.created_at,
        acknowledged_by=a.acknowledged_by,
        note=a.note,
        resolved_at=a.resolved_at,
    )


# ---------------------------------------------------------------- rooms


@app.get(
    "/api/rooms",
    response_model=list[RoomOut],
    operation_id="list_rooms",
    summary="List rooms",
    description="List the rooms of the home, optionally on one floor.",
    tags=["rooms"],
)
def list_rooms(
    floor: int | None = Query(None, description="Only rooms on this floor."),
) -> list[RoomOut]:
    with SessionLocal() as session:
        q = session.query(Room)
        if floor is not None:
            q = q.filter(Room.floor == floor)
        return [RoomOut.model_validate(r) for r in q.order_by(Room.id)]


@app.post(
    "/api/rooms",
    response_model=RoomOut,
    status_code=201,
    operation_id="create_room",
    summary="Create a room",
    description="Add a room to the home.",
    tags=["rooms"],
)
def create_room(body: RoomCreate) -> RoomOut:
    with SessionLocal() as session:
        if session.query(Room).filter(func.lower(Room.name) == body.name.strip().lower()).first():
            raise HTTPException(status_code=409, detail=f"Room '{body.name}' already exists")
        r = Room(name=body.name.strip(), floor=body.floor)
        session.add(r)
        session.commit()
        return RoomOut.model_validate(r)


@app.delete(
    "/api/rooms/{room_id}",
    response_model=DeleteResult,
    operation_id="delete_room",
    summary="Delete a room",
    description="Delete an empty room. Fails with 409 while devices are still assigned to it.",
    tags=["rooms"],
)
def delete_room(room_id: int = Path(..., description="Room ID.")) -> DeleteResult:
    with SessionLocal() as session:
        r = get_or_404(session, Room, room_id, "Room")
        n = session.query(Device).filter(Device.room_id == r.id).count()
        if n:
            raise HTTPException(status_code=409, detail=f"Room still has {n} device(s)")
        session.delete(r)
        session.commit()
        return DeleteResult(deleted=True, id=room_id)


# ---------------------------------------------------------------- devices


@app.get(
    "/api/devices",
    response_model=list[DeviceOut],
    operation_id="list_devices",
    summary="List devices",
    description="List devices with their current state, filtered by room, type, status, name or battery level.",
    tags=["devices"],
)
def list_devices(
    room_id: int | None = Query(None, description="Only devices in this room."),
    device_type: Literal[
        "light", "thermostat", "lock", "sensor", "plug", "camera", "blind", "speaker"
    ]
    | None = Query(None, description="Only this device type."),
    status: Literal["online", "offline"] | None = Query(
        None, description="Only online or offline devices."
    ),
    search: str | None = Query(None, description="Case-insensitive match on the device name."),
    max_battery: int | None = Query(
        None, ge=0, le=100, description="Only battery devices at or below this level."
    ),
) -> list[DeviceOut]:
    with SessionLocal() as session:
        q = session.query(Device)
        if room_id is not None:
            q = q.filter(Device.room_id == room_id)
        if device_type:
            q = q.filter(Device.device_type == device_type)
        if status:
            q = q.filter(Device.status == status)
        if search:
            q = q.filter(Device.name.ilike(f"%{search}%"))
        if max_battery is not None:
            q = q.filter(Device.battery_level.is_not(None), Device.battery_level <= max_battery)
        return [DeviceOut.model_validate(d) for d in q.order_by(Device.id)]


@app.get(
    "/api/devices/{device_id}",
    response_model=DeviceDetail,
    operation_id="get_device",
    summary="Get a device",
    description="Get a device with its room, open alert count and the scenes that use it.",
    tags=["devices"],
)
def get_device(device_id: int = Path(..., description="Device ID.")) -> DeviceDetail:
    with SessionLocal() as session:
        return device_detail(session, get_or_404(session, Device, device_id, "Device"))


@app.patch(
    "/api/devices/{device_id}",
    response_model=DeviceDetail,
    operation_id="update_device",
    summary="Rename or move a device",
    description="Rename a device and/or move it to another room.",
    tags=["devices"],
)
def update_device(
    body: DeviceUpdate, device_id: int = Path(..., description="Device ID.")
) -> DeviceDetail:
    with SessionLocal() as session:
        d = get_or_404(session, Device, device_id, "Device")
        if body.name is not None and body.name.strip() != d.name:
            name = body.name.strip()
            if (
                session.query(Device)
                .filter(func.lower(Device.name) == name.lower(), Device.id != d.id)
                .first()
            ):
                raise HTTPException(
                    status_code=409, detail=f"A device named '{name}' already exists"
                )
            d.name = name
        if body.room_id is not None:
            d.room_id = get_or_404(session, Room, body.room_id, "Room").id
        session.commit()
        return device_detail(session, d)


@app.post(
    "/api/devices/{device_id}/state",
    response_model=DeviceOut,
    operation_id="set_device_state",
    summary="Control a device",
    description="Change the state of a light (is_on, brightness, color_temp_k), plug/speaker/camera (is_on), "
    "thermostat (target_temp_c, hvac_mode) or blind (position). Use lock_door/unlock_door for locks; "
    "sensors are read-only. Offline devices cannot be controlled (409).",
    tags=["devices"],
)
def set_device_state(
    body: DeviceStateSet, device_id: int = Path(..., description="Device ID.")
) -> DeviceOut:
    with SessionLocal() as session:
        d = get_or_404(session, Device, device_id, "Device")
        changes = body.model_dump(exclude_none=True)
        if not changes:
            raise HTTPException(status_code=400, detail="Nothing to change")
        allowed = STATE_FIELDS.get(d.device_type)
        if allowed is None:
            raise HTTPException(
                status_code=400,
                detail=f"{d.device_type} devices cannot be controlled with this tool",
            )
        bad = sorted(set(changes) - allowed)
        if bad:
            raise HTTPException(
                status_code=400, detail=f"{d.device_type} devices do not support {', '.join(bad)}"
            )
        if d.status != "online":
            raise HTTPException(status_code=409, detail=f"'{d.name}' is offline")
        if "brightness" in changes and "is_on" not in changes:
            changes["is_on"] = True
        for k, v in changes.items():
            setattr(d, k, int(v) if k == "is_on" else v)
        d.last_seen_at = now_str()
        session.commit()
        return DeviceOut.model_validate(d)


def set_lock(device_id: int, locked: bool) -> DeviceOut:
    with SessionLocal() as session:
        d = get_or_404(session, Device, device_id, "Device")
        if d.device_type != "lock":
            raise HTTPException(status_code=400, detail=f"'{d.name}' is not a lock")
        if d.status != "online":
            raise HTTPException(status_code=409, detail=f"'{d.name}' is offline")
        d.is_locked = 1 if locked else 0
        d.last_seen_at = now_str()
        session.commit()
        return DeviceOut.model_validate(d)


@app.post(
    "/api/devices/{device_id}/lock",
    response_model=DeviceOut,
    operation_id="lock_door",
    summary="Lock a door",
    description="Lock a smart lock.",
    tags=["devices"],
)
def lock_door(device_id: int = Path(..., description="Lock device ID.")) -> DeviceOut:
    return set_lock(device_id, True)


@app.post(
    "/api/devices/{device_id}/unlock",
    response_model=DeviceOut,
    operation_id="unlock_door",
    summary="Unlock a door",
    description="Unlock a smart lock.",
    tags=["devices"],
)
def unlock_door(device_id: int = Path(..., description="Lock device ID.")) -> DeviceOut:
    return set_lock(device_id, False)


@app.delete(
    "/api/devices/{device_id}",
    response_model=DeleteResult,
    operation_id="remove_device",
    summary="Remove a device",
    description="Remove a device with its alerts and energy history. Fails with 409 while scenes, "
    "automations or active guest codes use it.",
    tags=["devices"],
)
def remove_device(device_id: int = Path(..., description="Device ID.")) -> DeleteResult:
    with SessionLocal() as session:
        d = get_or_404(session, Device, device_id, "Device")
        if session.query(SceneAction).filter(SceneAction.device_id == d.id).count():
            raise HTTPException(status_code=409, detail="Device is used by a scene")
        if session.query(Automation).filter(Automation.trigger_device_id == d.id).count():
            raise HTTPException(status_code=409, detail="Device triggers an automation")
        codes = session.query(GuestAccess).filter(GuestAccess.lock_device_id == d.id)
        if codes.filter(GuestAccess.status == "active").count():
            raise HTTPException(status_code=409, detail="Device has active guest codes")
        codes.delete()
        session.query(Alert).filter(Alert.device_id == d.id).delete()
        session.query(EnergyReading).filter(EnergyReading.device_id == d.id).delete()
        session.delete(d)
        session.commit()
        return DeleteResult(deleted=True, id=device_id)


# ---------------------------------------------------------------- scenes


@app.get(
    "/api/scenes",
    response_model=list[SceneOut],
    operation_id="list_scenes",
    summary="List scenes",
    description="List scenes with their actions, optionally only those with an action on a given device.",
    tags=["scenes"],
)
def list_scenes(
    device_id: int | None = Query(
        None, description="Only scenes that contain an action on this device."
    ),
    search: str | None = Query(None, description="Case-insensitive match on the scene name."),
) -> list[SceneOut]:
    with SessionLocal() as session:
        q = session.query(Scene)
        if device_id is not None:
            q = q.filter(
                Scene.id.in_(
                    session.query(SceneAction.scene_id).filter(SceneAction.device_id == device_id)
                )
            )
        if search:
            q = q.filter(Scene.name.ilike(f"%{search}%"))
        return [scene_out(session, s) for s in q.order_by(Scene.id)]


@app.get(
    "/api/scenes/{scene_id}",
    response_model=SceneDetail,
    operation_id="get_scene",
    summary="Get a scene",
    description="Get a scene with its actions and the automations that run it.",
    tags=["scenes"],
)
def get_scene(scene_id: int = Path(..., description="Scene ID.")) -> SceneDetail:
    with SessionLocal() as session:
        return scene_out(session, get_or_404(session, Scene, scene_id, "Scene"), detail=True)


@app.post(
    "/api/scenes",
    response_model=SceneDetail,
    status_code=201,
    operation_id="create_scene",
    summary="Create a scene",
    description="Create a scene with a list of device actions (at most one per device).",
    tags=["scenes"],
)
def create_scene(body: SceneCreate) -> SceneDetail:
    with SessionLocal() as session:
        if session.query(Scene).filter(func.lower(Scene.name) == body.name.strip().lower()).first():
            raise HTTPException(status_code=409, detail=f"Scene '{body.name}' already exists")
        s = Scene(
            name=body.name.strip(),
            description=body.description,
            created_by=CURRENT_USER_ID,
            created_at=now_str(),
        )
        session.add(s)
        session.flush()
        for item in body.actions:
            add_action(session, s, item)
        session.commit()
        return scene_out(session, s, detail=True)


@app.post(
    "/api/scenes/{scene_id}/actions",
    response_model=SceneDetail,
    status_code=201,
    operation_id="add_scene_action",
    summary="Add an action to a scene",
    description="Add one device action to a scene (409 if the scene already controls that device).",
    tags=["scenes"],
)
def add_scene_action(
    body: ActionIn, scene_id: int = Path(..., description="Scene ID.")
) -> SceneDetail:
    with SessionLocal() as session:
        s = get_or_404(session, Scene, scene_id, "Scene")
        add_action(session, s, body)
        session.commit()
        return scene_out(session, s, detail=True)


@app.delete(
    "/api/scenes/{scene_id}/actions/{action_id}",
    response_model=SceneDetail,
    operation_id="remove_scene_action",
    summary="Remove an action from a scene",
    description="Remove one action (by its action ID) from a scene.",
    tags=["scenes"],
)
def remove_scene_action(
    scene_id: int = Path(..., description="Scene ID."),
    action_id: int = Path(..., description="Action ID from the scene's action list."),
) -> SceneDetail:
    with SessionLocal() as session:
        s = get_or_404(session, Scene, scene_id, "Scene")
        a = session.get(SceneAction, action_id)
        if a is None or a.scene_id != s.id:
            raise HTTPException(
                status_code=404, detail=f"Action {action_id} not found in scene {scene_id}"
            )
        session.delete(a)
        session.commit()
        return scene_out(session, s, detail=True)


@app.post(
    "/api/scenes/{scene_id}/activate",
    response_model=ActivationResult,
    operation_id="activate_scene",
    summary="Activate a scene",
    description="Apply all actions of a scene now. Offline devices are skipped and reported.",
    tags=["scenes"],
)
def activate_scene(scene_id: int = Path(..., description="Scene ID.")) -> ActivationResult:
    with SessionLocal() as session:
        s = get_or_404(session, Scene, scene_id, "Scene")
        applied, skipped = [], []
        ts = now_str()
        for a in (
            session.query(SceneAction).filter(SceneAction.scene_id == s.id).order_by(SceneAction.id)
        ):
            d = session.get(Device, a.device_id)
            if d.status != "online":
                skipped.append(d.id)
                continue
            apply_action(d, a.action, a.value)
            d.last_seen_at = ts
            applied.append(d.id)
        s.last_activated_at = ts
        session.commit()
        return ActivationResult(
            scene=scene_out(session, s),
            applied_device_ids=applied,
            skipped_offline_device_ids=skipped,
        )


@app.delete(
    "/api/scenes/{scene_id}",
    response_model=DeleteResult,
    operation_id="delete_scene",
    summary="Delete a scene",
    description="Delete a scene. Fails with 409 while an automation runs it.",
    tags=["scenes"],
)
def delete_scene(scene_id: int = Path(..., description="Scene ID.")) -> DeleteResult:
    with SessionLocal() as session:
        s = get_or_404(session, Scene, scene_id, "Scene")
        if session.query(Automation).filter(Automation.scene_id == s.id).count():
            raise HTTPException(status_code=409, detail="Scene is used by an automation")
        session.query(SceneAction).filter(SceneAction.scene_id == s.id).delete()
        session.delete(s)
        session.commit()
        return DeleteResult(deleted=True, id=scene_id)


# ---------------------------------------------------------------- automations


@app.get(
    "/api/automations",
    response_model=list[AutomationOut],
    operation_id="list_automations",
    summary="List automations",
    description="List automations, filtered by scene, triggering device, enabled flag or name.",
    tags=["automations"],
)
def list_automations(
    scene_id: int | None = Query(None, description="Only automations running this scene."),
    trigger_device_id: int | None = Query(
        None, description="Only automations triggered by this device."
    ),
    is_enabled: bool | None = Query(None, description="Filter by enabled flag."),
    search: str | None = Query(None, description="Case-insensitive match on the name."),
) -> list[AutomationOut]:
    with SessionLocal() as session:
        q = session.query(Automation)
        if scene_id is not None:
            q = q.filter(Automation.scene_id == scene_id)
        if trigger_device_id is not None:
            q = q.filter(Automation.trigger_device_id == trigger_device_id)
        if is_enabled is not None:
            q = q.filter(Automation.is_enabled == (1 if is_enabled else 0))
        if search:
            q = q.filter(Automation.name.ilike(f"%{search}%"))
        return [AutomationOut.model_validate(a) for a in q.order_by(Automation.id)]


@app.post(
    "/api/automations",
    response_model=AutomationOut,
    status_code=201,
    operation_id="create_automation",
    summary="Create an automation",
    description="Run a scene at a time of day, at sunrise/sunset, or when a sensor reports an event.",
    tags=["automations"],
)
def create_automation(body: AutomationCreate) -> AutomationOut:
    with SessionLocal() as session:
        if (
            session.query(Automation)
            .filter(func.lower(Automation.name) == body.name.strip().lower())
            .first()
        ):
            raise HTTPException(status_code=409, detail=f"Automation '{body.name}' already exists")
        get_or_404(session, Scene, body.scene_id, "Scene")
        a = Automation(
            name=body.name.strip(),
            trigger_type=body.trigger_type,
            days=check_days(body.days),
            scene_id=body.scene_id,
            is_enabled=int(body.is_enabled),
        )
        if body.trigger_type == "time":
            a.trigger_time = check_time(body.trigger_time)
        elif body.trigger_time is not None:
            raise HTTPException(status_code=400, detail="trigger_time is only for time triggers")
        if body.trigger_type == "device_event":
            if body.trigger_device_id is None or body.trigger_event is None:
                raise HTTPException(
                    status_code=400, detail="device_event needs trigger_device_id and trigger_event"
                )
            d = get_or_404(session, Device, body.trigger_device_id, "Device")
            if d.device_type != "sensor" or d.sensor_kind != EVENT_SENSOR[body.trigger_event]:
                raise HTTPException(
                    status_code=400, detail=f"'{d.name}' cannot report {body.trigger_event}"
                )
            a.trigger_device_id, a.trigger_event = d.id, body.trigger_event
        elif body.trigger_device_id is not None or body.trigger_event is not None:
            raise HTTPException(
                status_code=400, detail="trigger_device_id/trigger_event are only for device_event"
            )
        session.add(a)
        session.commit()
        return AutomationOut.model_validate(a)


@app.patch(
    "/api/automations/{automation_id}",
    response_model=AutomationOut,
    operation_id="update_automation",
    summary="Update an automation",
    description="Rename, reschedule, change the scene of, enable or disable an automation.",
    tags=["automations"],
)
def update_automation(
    body: AutomationUpdate, automation_id: int = Path(..., description="Automation ID.")
) -> AutomationOut:
    with SessionLocal() as session:
        a = get_or_404(session, Automation, automation_id, "Automation")
        if body.name is not None and body.name.strip() != a.name:
            clash = (
                session.query(Automation)
                .filter(func.lower(Automation.name) == body.name.strip().lower())
                .first()
            )
            if clash:
                raise HTTPException(
                    status_code=409, detail=f"Automation '{body.name}' already exists"
                )
            a.name = body.name.strip()
        if body.trigger_time is not None:
            if a.trigger_type != "time":
                raise HTTPException(
                    status_code=400, detail="Only time triggers have a trigger_time"
                )
            a.trigger_time = check_time(body.trigger_time)
        if body.days is not None:
            a.days = check_days(body.days)
        if body.scene_id is not None:
            a.scene_id = get_or_404(session, Scene, body.scene_id, "Scene").id
        if body.is_enabled is not None:
            a.is_enabled = int(body.is_enabled)
        session.commit()
        return AutomationOut.model_validate(a)


@app.delete(
    "/api/automations/{automation_id}",
    response_model=DeleteResult,
    operation_id="delete_automation",
    summary="Delete an automation",
    description="Delete an automation.",
    tags=["automations"],
)
def delete_automation(automation_id: int = Path(..., description="Automation ID.")) -> DeleteResult:
    with SessionLocal() as session:
        session.delete(get_or_404(session, Automation, automation_id, "Automation"))
        session.commit()
        return DeleteResult(deleted=True, id=automation_id)


# ---------------------------------------------------------------- energy


@app.get(
    "/api/energy",
    response_model=EnergyReport,
    operation_id="get_energy_usage",
    summary="Energy usage report",
    description="Total kWh between two dates (inclusive), grouped by device or room (largest first) or by day.",
    tags=["energy"],
)
def get_energy_usage(
    start_date: str = Query(..., description="First day, YYYY-MM-DD."),
    end_date: str = Query(..., description="Last day (inclusive), YYYY-MM-DD."),
    group_by: Literal["device", "room", "day"] = Query(
        "device", description="Grouping of the rows."
    ),
    device_type: str | None = Query(None, description="Only devices of this type, e.g. 'plug'."),
    room_id: int | None = Query(None, description="Only devices in this room."),
    device_id: int | None = Query(None, description="Only this device."),
) -> EnergyReport:
    start, end = parse_day(start_date, "start_date"), parse_day(end_date, "end_date")
    if end < start:
        raise HTTPException(status_code=400, detail="end_date is before start_date")
    with SessionLocal() as session:
        q = (
            session.query(EnergyReading, Device, Room)
            .join(Device, Device.id == EnergyReading.device_id)
            .join(Room, Room.id == Device.room_id)
            .filter(EnergyReading.reading_date >= start, EnergyReading.reading_date <= end)
        )
        if device_type:
            q = q.filter(Device.device_type == device_type)
        if room_id is not None:
            q = q.filter(Device.room_id == room_id)
        if device_id is not None:
            q = q.filter(Device.id == device_id)
        sums: dict[str, list] = {}
        for reading, d, r in q:
            key, label = {
                "device": (str(d.id), d.name),
                "room": (str(r.id), r.name),
                "day": (reading.reading_date, reading.reading_date),
            }[group_by]
            sums.setdefault(key, [label, 0.0])[1] += reading.kwh
        rows = [EnergyRow(key=k, label=v[0], kwh=round(v[1], 3)) for k, v in sums.items()]
        rows.sort(key=(lambda e: e.key) if group_by == "day" else (lambda e: (-e.kwh, e.label)))
        return EnergyReport(
            start_date=start,
            end_date=end,
            group_by=group_by,
            total_kwh=round(sum(v[1] for v in sums.values()), 3),
            rows=rows,
        )


# ---------------------------------------------------------------- alerts


@app.get(
    "/api/alerts",
    response_model=list[AlertOut],
    operation_id="list_alerts",
    summary="List alerts",
    description="List alerts, newest first, filtered by status, type, severity, device or room.",
    tags=["alerts"],
)
def list_alerts(
    status: Literal["open", "acknowledged", "resolved"] | None = Query(
        None, description="Filter by status."
    ),
    alert_type: str | None = Query(None, description="e.g. battery_low, offline, leak_detected."),
    severity: Literal["info", "warning", "critical"] | None = Query(
        None, description="Filter by severity."
    ),
    device_id: int | None = Query(None, description="Only alerts of this device."),
    room_id: int | None = Query(None, description="Only alerts of devices in this room."),
) -> list[AlertOut]:
    with SessionLocal() as session:
        q = session.query(Alert)
        if status:
            q = q.filter(Alert.status == status)
        if alert_type:
            q = q.filter(Alert.alert_type == alert_type)
        if severity:
            q = q.filter(Alert.severity == severity)
        if device_id is not None:
            q = q.filter(Alert.device_id == device_id)
        if room_id is not None:
            q = q.filter(
                Alert.device_id.in_(session.query(Device.id).filter(Device.room_id == room_id))
            )
        return [alert_out(session, a) for a in q.order_by(Alert.created_at.desc(), Alert.id.desc())]


@app.post(
    "/api/alerts/{alert_id}/acknowledge",
    response_model=AlertOut,
    operation_id="acknowledge_alert",
    summary="Acknowledge an alert",
    description="Acknowledge an open alert, optionally with a note.",
    tags=["alerts"],
)
def acknowledge_alert(
    body: AlertNote, alert_id: int = Path(..., description="Alert ID.")
) -> AlertOut:
    with SessionLocal() as session:
        a = get_or_404(session, Alert, alert_id, "Alert")
        if a.status != "open":
            raise HTTPException(status_code=409, detail=f"Alert is already {a.status}")
        a.status = "acknowledged"
        a.acknowledged_by = CURRENT_USER_ID
        if body.note is not None:
            a.note = body.note
        session.commit()
        return alert_out(session, a)


@app.post(
    "/api/alerts/{alert_id}/resolve",
    response_model=AlertOut,
    operation_id="resolve_alert",
    summary="Resolve an alert",
    description="Mark an open or acknowledged alert as resolved, optionally with a note.",
    tags=["alerts"],
)
def resolve_alert(body: AlertNote, alert_id: int = Path(..., description="Alert ID.")) -> AlertOut:
    with SessionLocal() as session:
        a = get_or_404(session, Alert, alert_id, "Alert")
        if a.status == "resolved":
            raise HTTPException(status_code=409, detail="Alert is already resolved")
        a.status = "resolved"
        a.resolved_at = now_str()
        if a.acknowledged_by is None:
            a.acknowledged_by = CURRENT_USER_ID
        if body.note is not None:
            a.note = body.note
        session.commit()
        return alert_out(session, a)


# ---------------------------------------------------------------- people


@app.get(
    "/api/users",
    response_model=list[UserOut],
    operation_id="list_users",
    summary="List household members",
    description="List the people who share the home.",
    tags=["people"],
)
def list_users() -> list[UserOut]:
    with SessionLocal() as session:
        return [UserOut.model_validate(u) for u in session.query(User).order_by(User.id)]


@app.get(
    "/api/guest-access",
    response_model=list[GuestAccessOut],
    operation_id="list_guest_access",
    summary="List guest codes",
    description="List guest door codes, filtered by status, guest name or lock.",
    tags=["people"],
)
def list_guest_access(
    status: Literal["active", "revoked", "expired"] | None = Query(
        None, description="Filter by status."
    ),
    search: str | None = Query(
        None, description="Case-insensitive match on the guest name or email."
    ),
    lock_device_id: int | None = Query(None, description="Only codes for this lock."),
) -> list[GuestAccessOut]:
    with SessionLocal() as session:
        q = session.query(GuestAccess)
        if status:
            q = q.filter(GuestAccess.status == status)
        if search:
            like = f"%{search}%"
            q = q.filter(GuestAccess.guest_name.ilike(like) | GuestAccess.guest_email.ilike(like))
        if lock_device_id is not None:
            q = q.filter(GuestAccess.lock_device_id == lock_device_id)
        return [GuestAccessOut.model_validate(g) for g in q.order_by(GuestAccess.id)]


@app.post(
    "/api/guest-access",
    response_model=GuestAccessOut,
    status_code=201,
    operation_id="grant_guest_access",
    summary="Grant a guest code",
    description="Create a keypad code for one lock, valid in a time window. The code must not be in use by "
    "another active guest on the same lock.",
    tags=["people"],
)
def grant_guest_access(body: GuestAccessCreate) -> GuestAccessOut:
    with SessionLocal() as session:
        lock = get_or_404(session, Device, body.lock_device_id, "Device")
        if lock.device_type != "lock":
            raise HTTPException(status_code=400, detail=f"'{lock.name}' is not a lock")
        start = parse_minute(body.valid_from, "valid_from")
        end = parse_minute(body.valid_until, "valid_until")
        if end <= start:
            raise HTTPException(status_code=400, detail="valid_until must be after valid_from")
        clash = (
            session.query(GuestAccess)
            .filter(
                GuestAccess.lock_device_id == lock.id,
                GuestAccess.access_code == body.access_code,
                GuestAccess.status == "active",
            )
            .first()
        )
        if clash:
            raise HTTPException(status_code=409, detail="This code is already in use on that lock")
        g = GuestAccess(
            guest_name=body.guest_name.strip(),
            guest_email=body.guest_email,
            lock_device_id=lock.id,
            access_code=body.access_code,
            valid_from=start,
            valid_until=end,
            status="active",
            created_by=CURRENT_USER_ID,
            created_at=now_str(),
        )
        session.add(g)
        session.commit()
        return GuestAccessOut.model_validate(g)


@app.post(
    "/api/guest-access/{access_id}/revoke",
    response_model=GuestAccessOut,
    operation_id="revoke_guest_access",
    summary="Revoke a guest code",
    description="Revoke an active guest code immediately.",
    tags=["people"],
)
def revoke_guest_access(
    access_id: int = Path(..., description="Guest access ID."),
) -> GuestAccessOut:
    with SessionLocal() as session:
        g = get_or_404(session, GuestAccess, access_id, "Guest access")
        if g.status != "active":
            raise HTTPException(status_code=409, detail=f"Guest access is already {g.status}")
        g.status = "revoked"
        session.commit()
        return GuestAccessOut.model_validate(g)


if __name__ == "__main__":
    import uvicorn

    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
