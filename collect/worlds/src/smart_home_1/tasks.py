"""Tasks, verifiers and reference solutions of the smart_home_1 world.

Each verifier is a self-contained function; the builder ships its source (renamed to
``verify_task_completion``) in gen_verifier.pure_code.jsonl.
"""

from collect.worlds.src.common import call

SCENARIO = "smart_home_1"

DESCRIPTION = (
    "HearthHub is a smart home hub app (similar to Google Home, SmartThings or Home Assistant) for "
    "one family home. The home has rooms on several floors and devices of many types: lights "
    "(power, brightness, color temperature), thermostats (target temperature, HVAC mode), smart "
    "locks, sensors (motion, contact, leak, smoke) with battery levels, smart plugs, cameras, "
    "speakers and blinds, each online or offline. Users control devices directly, group device "
    "actions into scenes that can be activated at once, and create automations that run a scene "
    "at a time of day on chosen days, at sunrise or sunset, or when a sensor reports an event. The "
    "hub records daily energy consumption per metered device and offers usage reports by device, "
    "room or day. Alerts (leaks, low batteries, offline devices, firmware updates) can be "
    "acknowledged with a note or resolved. Household members are listed, and guests such as "
    "cleaners or visitors receive keypad codes for specific locks, valid in a time window, which "
    "can be revoked."
)


# ---------------------------------------------------------------- task 0


def v0(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    before = q(initial_db_path, "SELECT id, name, floor FROM rooms ORDER BY id")
    after = q(final_db_path, "SELECT id, name, floor FROM rooms ORDER BY id")
    if any(r[1].lower() == "sunroom" for r in before):
        return {"result": "others"}
    new = [r for r in after if r not in before]
    if len(after) != len(before) + 1 or len(new) != 1:
        return {"result": "others"}
    if new[0][1].strip().lower() != "sunroom" or new[0][2] != 0:
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 1


def v1(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    sql = "SELECT id, name, is_on, brightness, target_temp_c, hvac_mode, is_locked, position FROM devices"
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    target = [d for d, r in before.items() if r[1] == "Back Patio Door Lock"]
    if len(target) != 1 or set(before) != set(after) or before[target[0]][6] != 0:
        return {"result": "others"}
    if after[target[0]][6] != 1:
        return {"result": "others"}
    if any(after[d] != r for d, r in before.items() if d != target[0]):
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 2


def v2(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    sql = (
        "SELECT d.id, r.name, d.target_temp_c, d.hvac_mode FROM devices d JOIN rooms r ON r.id = d.room_id "
        "WHERE d.device_type = 'thermostat'"
    )
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    target = [d for d, r in before.items() if r[1] == "Living Room"]
    if len(target) != 1 or set(before) != set(after):
        return {"result": "others"}
    t = after[target[0]]
    if t[2] is None or abs(t[2] - 23.5) > 1e-6 or t[3] != "cool":
        return {"result": "others"}
    if any(after[d] != r for d, r in before.items() if d != target[0]):
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 3


def v3(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    target = q(
        initial_db_path,
        "SELECT a.id FROM alerts a JOIN devices d ON d.id = a.device_id JOIN rooms r ON r.id = d.room_id "
        "WHERE r.name = 'Laundry Room' AND a.alert_type = 'leak_detected' AND a.status = 'open'",
    )
    plug = q(initial_db_path, "SELECT id FROM devices WHERE name = 'Washer Smart Plug'")
    if len(target) != 1 or len(plug) != 1:
        return {"result": "others"}
    sql = "SELECT id, status, note FROM alerts"
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    if set(before) != set(after):
        return {"result": "others"}
    aid = target[0][0]
    if (
        after[aid][1] != "acknowledged"
        or (after[aid][2] or "").strip().rstrip(".").lower() != "plumber booked for friday"
    ):
        return {"result": "others"}
    if any(after[a] != r for a, r in before.items() if a != aid):
        return {"result": "others"}
    on_before = dict(q(initial_db_path, "SELECT id, is_on FROM devices"))
    on_after = dict(q(final_db_path, "SELECT id, is_on FROM devices"))
    pid = plug[0][0]
    if on_after.get(pid) != 0 or any(
        on_after.get(d) != v for d, v in on_before.items() if d != pid
    ):
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 4


def v4(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    def actions(path):
        rows = q(
            path,
            "SELECT d.name, a.action, a.value FROM scene_actions a JOIN scenes s ON s.id = a.scene_id "
            "JOIN devices d ON d.id = a.device_id WHERE s.name = 'Movie Night'",
        )
        return sorted((n, act, None if v is None else round(float(v), 3)) for n, act, v in rows)

    before = actions(initial_db_path)
    if not any(r[0] == "Kitchen Pendant Lights" for r in before):
        return {"result": "others"}
    expected = sorted(
        [r for r in before if r[0] != "Kitchen Pendant Lights"]
        + [("Upstairs Hallway Light", "set_brightness", 30.0)]
    )
    if actions(final_db_path) != expected:
        return {"result": "others"}
    other_sql = "SELECT scene_id, device_id, action, value FROM scene_actions WHERE scene_id NOT IN (SELECT id FROM scenes WHERE name = 'Movie Night') ORDER BY id"
    if q(initial_db_path, other_sql) != q(final_db_path, other_sql):
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 5


def v5(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    usage = q(
        initial_db_path,
        "SELECT d.id, d.name, SUM(e.kwh) AS total FROM energy_readings e JOIN devices d ON d.id = e.device_id "
        "WHERE d.device_type = 'plug' AND e.reading_date BETWEEN '2025-06-01' AND '2025-06-07' "
        "GROUP BY d.id ORDER BY total DESC",
    )
    if len(usage) < 2 or abs(usage[0][2] - usage[1][2]) < 1e-6:
        return {"result": "others"}
    top_id, top_name = usage[0][0], usage[0][1]
    if not final_answer or top_name.lower() not in final_answer.lower():
        return {"result": "others"}
    state = q(final_db_path, "SELECT is_on FROM devices WHERE id = ?", (top_id,))
    if not state or state[0][0] != 0:
        return {"result": "others"}
    on_before = dict(q(initial_db_path, "SELECT id, is_on FROM devices"))
    on_after = dict(q(final_db_path, "SELECT id, is_on FROM devices"))
    if any(on_after.get(d) != v for d, v in on_before.items() if d != top_id):
        return {"result": "others"}
    turning_on = {
        s
        for (s,) in q(
            initial_db_path,
            "SELECT scene_id FROM scene_actions WHERE device_id = ? AND action = 'turn_on'",
            (top_id,),
        )
    }
    before = {
        r[0]: r for r in q(initial_db_path, "SELECT id, scene_id, is_enabled FROM automations")
    }
    after = {r[0]: r for r in q(final_db_path, "SELECT id, scene_id, is_enabled FROM automations")}
    if set(before) != set(after):
        return {"result": "others"}
    disabled = 0
    for aid, (_, scene_id, enabled) in before.items():
        expected = 0 if scene_id in turning_on else enabled
        disabled += expected != enabled
        if after[aid][2] != expected or after[aid][1] != scene_id:
            return {"result": "others"}
    return {"result": "complete"} if disabled else {"result": "others"}


# ---------------------------------------------------------------- task 6


def v6(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    locks = dict(q(initial_db_path, "SELECT name, id FROM devices WHERE device_type = 'lock'"))
    front, gate = locks.get("Front Door Lock"), locks.get("Side Gate Lock")
    if front is None or gate is None:
        return {"result": "others"}
    sql = "SELECT id, guest_name, lock_device_id, access_code, valid_from, valid_until, status FROM guest_access"
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    new = [r for gid, r in after.items() if gid not in before]
    if len(new) != 2 or not set(before) <= set(after):
        return {"result": "others"}
    if sorted(r[2] for r in new) != sorted([front, gate]):
        return {"result": "others"}
    for _, name, _, code, start, end, status in new:
        if "lena fischer" not in name.lower() or code != "4829" or status != "active":
            return {"result": "others"}
        if start[:16] != "2025-06-20 15:00" or end[:16] != "2025-06-23 11:00":
            return {"result": "others"}
    revoked = 0
    for gid, row in before.items():
        expected = row
        if "sam patel" in row[1].lower() and row[6] == "active":
            expected = row[:6] + ("revoked",)
            revoked += 1
        if after[gid] != expected:
            return {"result": "others"}
    locked = q(final_db_path, "SELECT is_locked FROM devices WHERE id = ?", (gate,))
    if not revoked or not locked or locked[0][0] != 1:
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 7


def v7(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    low = {
        d
        for (d,) in q(
            initial_db_path,
            "SELECT id FROM devices WHERE battery_level IS NOT NULL AND battery_level < 20",
        )
    }
    if not low:
        return {"result": "others"}
    sql = "SELECT id, device_id, alert_type, status, note FROM alerts"
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    if set(before) != set(after):
        return {"result": "others"}
    acked = 0
    for aid, (_, device_id, alert_type, status, _note) in before.items():
        if device_id in low and alert_type == "battery_low" and status == "open":
            acked += 1
            new_note = (after[aid][4] or "").strip().rstrip(".").lower()
            if after[aid][3] != "acknowledged" or new_note != "replacement batteries ordered":
                return {"result": "others"}
        elif after[aid] != before[aid]:
            return {"result": "others"}
    a_sql = "SELECT id, trigger_device_id, is_enabled FROM automations"
    a_before = {r[0]: r for r in q(initial_db_path, a_sql)}
    a_after = {r[0]: r for r in q(final_db_path, a_sql)}
    if set(a_before) != set(a_after):
        return {"result": "others"}
    disabled = 0
    for aid, (_, trigger_device, enabled) in a_before.items():
        expected = 0 if trigger_device in low else enabled
        disabled += expected != enabled
        if a_after[aid][2] != expected:
            return {"result": "others"}
    return {"result": "complete"} if acked and disabled else {"result": "others"}


# ---------------------------------------------------------------- task 8


def v8(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    if q(initial_db_path, "SELECT id FROM scenes WHERE name = 'Away Mode'"):
        return {"result": "others"}
    lights = {
        d
        for (d,) in q(
            initial_db_path,
            "SELECT d.id FROM devices d JOIN rooms r ON r.id = d.room_id "
            "WHERE d.device_type = 'light' AND d.status = 'online' AND r.floor = 0",
        )
    }
    locks = {d for (d,) in q(initial_db_path, "SELECT id FROM devices WHERE device_type = 'lock'")}
    thermos = {
        d for (d,) in q(initial_db_path, "SELECT id FROM devices WHERE device_type = 'thermostat'")
    }
    expected = sorted(
        [(d, "turn_off", None) for d in lights]
        + [(d, "lock", None) for d in locks]
        + [(d, "set_temperature", 16.0) for d in thermos]
    )
    scene = q(final_db_path, "SELECT id FROM scenes WHERE name = 'Away Mode'")
    if len(scene) != 1 or not lights:
        return {"result": "others"}
    sid = scene[0][0]
    acts = q(
        final_db_path,
        "SELECT device_id, action, value FROM scene_actions WHERE scene_id = ?",
        (sid,),
    )
    if sorted((d, a, None if v is None else round(float(v), 3)) for d, a, v in acts) != expected:
        return {"result": "others"}
    auto = q(
        final_db_path,
        "SELECT trigger_type, trigger_time, days, scene_id, is_enabled FROM automations WHERE name = 'Away on weekdays'",
    )
    if auto != [("time", "08:45", "weekdays", sid, 1)]:
        return {"result": "others"}
    state = {
        r[0]: r[1:]
        for r in q(final_db_path, "SELECT id, is_on, is_locked, target_temp_c FROM devices")
    }
    if any(state[d][0] != 0 for d in lights) or any(state[d][1] != 1 for d in locks):
        return {"result": "others"}
    if any(state[d][2] is None or abs(state[d][2] - 16.0) > 1e-6 for d in thermos):
        return {"result": "others"}
    a_before = dict(q(initial_db_path, "SELECT name, is_enabled FROM automations"))
    a_after = dict(q(final_db_path, "SELECT name, is_enabled FROM automations"))
    for name, enabled in a_before.items():
        if a_after.get(name) != (0 if name == "Focus Time" else enabled):
            return {"result": "others"}
    if a_before.get("Focus Time") != 1:
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 9


def v9(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    rooms = dict(q(initial_db_path, "SELECT name, id FROM rooms"))
    office, guest = rooms.get("Office"), rooms.get("Guest Bedroom")
    if office is None or guest is None:
        return {"result": "others"}
    if q(final_db_path, "SELECT id FROM rooms WHERE id = ? OR name = 'Office'", (office,)):
        return {"result": "others"}
    if len(q(final_db_path, "SELECT id FROM rooms")) != len(rooms) - 1:
        return {"result": "others"}
    before = {r[0]: r for r in q(initial_db_path, "SELECT id, name, room_id FROM devices")}
    after = {r[0]: r for r in q(final_db_path, "SELECT id, name, room_id FROM devices")}
    if set(before) != set(after):
        return {"result": "others"}
    for did, (_, name, room_id) in before.items():
        exp_room = guest if room_id == office else room_id
        exp_name = "Guest Desk Lamp" if name == "Office Desk Lamp" else name
        if after[did][2] != exp_room or after[did][1] != exp_name:
            return {"result": "others"}
    heater = [d for d, r in before.items() if r[1] == "Space Heater Plug"]
    if len(heater) != 1:
        return {"result": "others"}
    sql = "SELECT id, scene_id, device_id, action, value FROM scene_actions ORDER BY id"
    acts_before = [r for r in q(initial_db_path, sql) if r[2] != heater[0]]
    if q(final_db_path, sql) != acts_before:
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- tasks

_AWAY_ACTIONS = (
    [{"device_id": d, "action": "turn_off"} for d in (1, 2, 3, 4, 5, 6, 13)]
    + [{"device_id": d, "action": "lock"} for d in (17, 18, 19, 20)]
    + [{"device_id": d, "action": "set_temperature", "value": 16} for d in (15, 16)]
)
_AWAY_REST = [
    call(
        "create_automation",
        name="Away on weekdays",
        trigger_type="time",
        trigger_time="08:45",
        days="weekdays",
        scene_id=11,
    ),
    call("activate_scene", scene_id=11),
    call("list_automations", search="Focus Time"),
    call("update_automation", automation_id=10, is_enabled=False),
]
_LENA = {
    "guest_name": "Lena Fischer",
    "access_code": "4829",
    "valid_from": "2025-06-20 15:00",
    "valid_until": "2025-06-23 11:00",
}
_HEATER_OUT = [
    call("list_scenes", device_id=31),
    call("remove_scene_action", scene_id=3, action_id=17),
    call("remove_scene_action", scene_id=4, action_id=22),
    call("remove_scene_action", scene_id=5, action_id=24),
    call("delete_room", room_id=9),
]

TASKS = [
    {
        "task": "Add a new room called 'Sunroom' on the ground floor (floor 0).",
        "verifier": v0,
        "negatives": [[call("create_room", name="Sunroom", floor=1)]],
        "calls": [call("create_room", name="Sunroom", floor=0)],
    },
    {
        "task": "Lock the Back Patio Door Lock.",
        "verifier": v1,
        "negatives": [[call("lock_door", device_id=20)]],
        "calls": [
            call("list_devices", search="Back Patio"),
            call("lock_door", device_id=18),
        ],
    },
    {
        "task": "Switch the living room thermostat to cool mode with a target of 23.5 C.",
        "verifier": v2,
        "negatives": [
            [call("set_device_state", device_id=16, target_temp_c=23.5, hvac_mode="cool")]
        ],
        "calls": [
            call("list_rooms"),
            call("list_devices", room_id=1, device_type="thermostat"),
            call("set_device_state", device_id=15, target_temp_c=23.5, hvac_mode="cool"),
        ],
    },
    {
        "task": "The laundry room leak sensor has raised an alert. Acknowledge it with the note 'Plumber "
        "booked for Friday' and switch off the washer's smart plug.",
        "verifier": v3,
        "negatives": [
            [
                call("resolve_alert", alert_id=1, note="Plumber booked for Friday"),
                call("set_device_state", device_id=29, is_on=False),
            ]
        ],
        "calls": [
            call("list_alerts", status="open", alert_type="leak_detected"),
            call("acknowledge_alert", alert_id=1, note="Plumber booked for Friday"),
            call("list_devices", search="Washer"),
            call("set_device_state", device_id=29, is_on=False),
        ],
    },
    {
        "task": "Update the 'Movie Night' scene: add the upstairs hallway light at 30% brightness and "
        "remove the kitchen pendant lights from it. Keep its other actions as they are.",
        "verifier": v4,
        "negatives": [
            [
                call("add_scene_action", scene_id=1, device_id=7, action="turn_on"),
                call("remove_scene_action", scene_id=1, action_id=5),
            ]
        ],
        "calls": [
            call("list_scenes", search="Movie Night"),
            call("get_scene", scene_id=1),
            call("list_devices", search="Upstairs Hallway"),
            call("add_scene_action", scene_id=1, device_id=7, action="set_brightness", value=30),
            call("remove_scene_action", scene_id=1, action_id=5),
        ],
    },
    {
        "task": "Find the smart plug that used the most energy from June 1 to June 7, 2025 (inclusive). "
        "Switch it off and disable every automation whose scene turns that plug on. Tell me which plug "
        "it was.",
        "verifier": v5,
        "final_answer": "The Space Heater Plug used the most energy (17.3 kWh from June 1 to 7). I switched "
        "it off and disabled the 'Office Warm-up' and 'Winter Evening Comfort' automations.",
        "negatives": [
            [
                call("set_device_state", device_id=30, is_on=False),
                call("update_automation", automation_id=3, is_enabled=False),
                call("update_automation", automation_id=4, is_enabled=False),
            ],
            [
                call("set_device_state", device_id=31, is_on=False),
                call("update_automation", automation_id=2, is_enabled=False),
                call("update_automation", automation_id=3, is_enabled=False),
                call("update_automation", automation_id=4, is_enabled=False),
            ],
        ],
        "calls": [
            call(
                "get_energy_usage",
                start_date="2025-06-01",
                end_date="2025-06-07",
                device_type="plug",
                group_by="device",
            ),
            call("set_device_state", device_id=31, is_on=False),
            call("list_scenes", device_id=31),
            call("list_automations"),
            call("update_automation", automation_id=3, is_enabled=False),
            call("update_automation", automation_id=4, is_enabled=False),
        ],
    },
    {
        "task": "Our guest Lena Fischer stays from 2025-06-20 15:00 to 2025-06-23 11:00. Give her the code "
        "4829 on both the Front Door Lock and the Side Gate Lock for exactly that window. Revoke every "
        "active code of Sam Patel, our former dog walker, and lock the Side Gate Lock, which was left "
        "unlocked.",
        "verifier": v6,
        "negatives": [
            [
                call("grant_guest_access", lock_device_id=17, **_LENA),
                call("grant_guest_access", lock_device_id=19, **_LENA),
                call("revoke_guest_access", access_id=1),
                call("revoke_guest_access", access_id=2),
                call("lock_door", device_id=20),
            ]
        ],
        "calls": [
            call("list_devices", device_type="lock"),
            call("grant_guest_access", lock_device_id=17, **_LENA),
            call("grant_guest_access", lock_device_id=20, **_LENA),
            call("list_guest_access", search="Sam Patel", status="active"),
            call("revoke_guest_access", access_id=1),
            call("revoke_guest_access", access_id=2),
            call("lock_door", device_id=20),
        ],
    },
    {
        "task": "For every device whose battery is below 20%, acknowledge its open low-battery alert with "
        "the note 'Replacement batteries ordered', and disable every automation that is triggered by "
        "one of those devices. Leave all other alerts alone.",
        "verifier": v7,
        "negatives": [
            [
                call("acknowledge_alert", alert_id=a, note="Replacement batteries ordered")
                for a in (3, 4, 6, 7)
            ]
            + [call("update_automation", automation_id=a, is_enabled=False) for a in (5, 6)]
        ],
        "calls": [
            call("list_devices", max_battery=19),
            call("list_alerts", alert_type="battery_low", status="open"),
            call("acknowledge_alert", alert_id=3, note="Replacement batteries ordered"),
            call("acknowledge_alert", alert_id=4, note="Replacement batteries ordered"),
            call("acknowledge_alert", alert_id=6, note="Replacement batteries ordered"),
            call("list_automations"),
            call("update_automation", automation_id=5, is_enabled=False),
            call("update_automation", automation_id=6, is_enabled=False),
        ],
    },
    {
        "task": "Set up an 'Away Mode' scene that turns off every online light on the ground floor (floor "
        "0), locks all door locks and sets every thermostat to 16 C. Create an automation 'Away on "
        "weekdays' that runs it on weekdays at 08:45, activate the scene right now, and disable the "
        "'Focus Time' automation.",
        "verifier": v8,
        "negatives": [
            [
                call(
                    "create_scene",
                    name="Away Mode",
                    actions=_AWAY_ACTIONS + [{"device_id": 12, "action": "turn_off"}],
                )
            ]
            + _AWAY_REST
        ],
        "calls": [
            call("list_rooms", floor=0),
            call("list_devices", device_type="light"),
            call("list_devices", device_type="lock"),
            call("list_devices", device_type="thermostat"),
            call(
                "create_scene",
                name="Away Mode",
                description="Everything off and locked while we are out.",
                actions=_AWAY_ACTIONS,
            ),
            *_AWAY_REST,
        ],
    },
    {
        "task": "We are turning the Office into a nursery and moving the office into the Guest Bedroom. "
        "Move every device from the Office to the Guest Bedroom, rename the 'Office Desk Lamp' to "
        "'Guest Desk Lamp', remove the Space Heater Plug from every scene, and then delete the Office "
        "room.",
        "verifier": v9,
        "negatives": [
            [
                call("update_device", device_id=10, name="Guest Desk Lamp", room_id=7),
                call("update_device", device_id=11, room_id=7),
                call("update_device", device_id=31, room_id=7),
                call("update_device", device_id=41, room_id=7),
                *_HEATER_OUT,
            ]
        ],
        "calls": [
            call("list_rooms"),
            call("list_devices", room_id=9),
            call("update_device", device_id=10, name="Guest Desk Lamp", room_id=10),
            call("update_device", device_id=11, room_id=10),
            call("update_device", device_id=31, room_id=10),
            call("update_device", device_id=41, room_id=10),
            *_HEATER_OUT,
        ],
    },
]
