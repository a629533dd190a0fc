"""Deterministic seed data of the smart_home_1 world (HearthHub, the Rivera family home).

"Now" is 2025-06-12 UTC; every value is a literal or computed from literals.
"""

DEVICE_COLUMNS = [
    "id",
    "name",
    "room_id",
    "device_type",
    "manufacturer",
    "model",
    "status",
    "is_on",
    "brightness",
    "color_temp_k",
    "target_temp_c",
    "current_temp_c",
    "hvac_mode",
    "is_locked",
    "position",
    "battery_level",
    "sensor_kind",
    "firmware_version",
    "last_seen_at",
]

MAKERS = {
    "light": ("Philips Hue", "White and Color A19"),
    "thermostat": ("Ecobee", "Smart Thermostat Premium"),
    "lock": ("August", "Wi-Fi Smart Lock"),
    "sensor": ("Aqara", "Sensor P2"),
    "plug": ("TP-Link Kasa", "KP125M"),
    "camera": ("Arlo", "Pro 5S"),
    "blind": ("IKEA", "PRAEKTIG"),
    "speaker": ("Sonos", "Era 100"),
}


def device(device_id, name, room_id, device_type, status="online", firmware="1.4.2", **state):
    maker, model = MAKERS[device_type]
    seen = "2025-06-12 09:00:00" if status == "online" else "2025-06-07 21:13:00"
    row = dict.fromkeys(DEVICE_COLUMNS)
    row.update(
        id=device_id,
        name=name,
        room_id=room_id,
        device_type=device_type,
        manufacturer=maker,
        model=model,
        status=status,
        firmware_version=firmware,
        last_seen_at=seen,
        **state,
    )
    return tuple(row[c] for c in DEVICE_COLUMNS)


# fmt: off
ROOMS = [
    (1, "Living Room", 0), (2, "Kitchen", 0), (3, "Dining Room", 0), (4, "Entryway", 0),
    (5, "Laundry Room", 0), (6, "Garage", 0), (7, "Primary Bedroom", 1), (8, "Kids Room", 1),
    (9, "Office", 1), (10, "Guest Bedroom", 1), (11, "Upstairs Hallway", 1), (12, "Backyard", 0),
    (13, "Basement", -1),
]

DEVICES = [
    device(1, "Living Room Ceiling Light", 1, "light", is_on=1, brightness=80, color_temp_k=2700),
    device(2, "Living Room Floor Lamp", 1, "light", is_on=0, brightness=60, color_temp_k=2700),
    device(3, "Kitchen Pendant Lights", 2, "light", is_on=1, brightness=100, color_temp_k=4000),
    device(4, "Kitchen Under-Cabinet Lights", 2, "light", is_on=0, brightness=100, color_temp_k=4000),
    device(5, "Dining Chandelier", 3, "light", is_on=0, brightness=70, color_temp_k=2700),
    device(6, "Entryway Light", 4, "light", is_on=1, brightness=40, color_temp_k=3000),
    device(7, "Upstairs Hallway Light", 11, "light", is_on=0, brightness=50, color_temp_k=3000),
    device(8, "Primary Bedroom Lamp", 7, "light", is_on=0, brightness=45, color_temp_k=2200),
    device(9, "Kids Room Night Light", 8, "light", is_on=1, brightness=10, color_temp_k=2200),
    device(10, "Office Desk Lamp", 9, "light", is_on=1, brightness=90, color_temp_k=5000),
    device(11, "Office Ceiling Light", 9, "light", is_on=0, brightness=100, color_temp_k=4000),
    device(12, "Garage Light", 6, "light", status="offline", is_on=0, brightness=100, color_temp_k=4000),
    device(13, "Backyard String Lights", 12, "light", is_on=0, brightness=100, color_temp_k=2200),
    device(14, "Guest Bedroom Lamp", 10, "light", is_on=0, brightness=50, color_temp_k=2700),
    device(15, "Living Room Thermostat", 1, "thermostat", firmware="4.7.9", target_temp_c=21.0, current_temp_c=22.4, hvac_mode="heat"),
    device(16, "Upstairs Thermostat", 11, "thermostat", firmware="4.8.1", target_temp_c=20.0, current_temp_c=20.6, hvac_mode="auto"),
    device(17, "Front Door Lock", 4, "lock", is_locked=1, battery_level=85),
    device(18, "Back Patio Door Lock", 12, "lock", is_locked=0, battery_level=62),
    device(19, "Garage Side Door Lock", 6, "lock", is_locked=1, battery_level=14),
    device(20, "Side Gate Lock", 12, "lock", is_locked=0, battery_level=48),
    device(21, "Entryway Motion Sensor", 4, "sensor", sensor_kind="motion", battery_level=76),
    device(22, "Front Door Contact Sensor", 4, "sensor", sensor_kind="contact", battery_level=90),
    device(23, "Laundry Leak Sensor", 5, "sensor", sensor_kind="leak", battery_level=55),
    device(24, "Basement Leak Sensor", 13, "sensor", sensor_kind="leak", battery_level=11),
    device(25, "Backyard Motion Sensor", 12, "sensor", sensor_kind="motion", battery_level=64),
    device(26, "Kitchen Smoke Detector", 2, "sensor", sensor_kind="smoke", battery_level=80),
    device(27, "Garage Door Contact Sensor", 6, "sensor", sensor_kind="contact", battery_level=18),
    device(28, "Upstairs Motion Sensor", 11, "sensor", status="offline", sensor_kind="motion", battery_level=3),
    device(29, "Washer Smart Plug", 5, "plug", is_on=1),
    device(30, "Dehumidifier Plug", 13, "plug", is_on=1),
    device(31, "Space Heater Plug", 9, "plug", is_on=1),
    device(32, "Aquarium Plug", 1, "plug", is_on=1),
    device(33, "Holiday Lights Plug", 12, "plug", is_on=0),
    device(34, "Garage Freezer Plug", 6, "plug", is_on=1),
    device(35, "Coffee Maker Plug", 2, "plug", is_on=0),
    device(36, "Living Room Speaker", 1, "speaker", is_on=1),
    device(37, "Front Door Camera", 4, "camera", is_on=1, battery_level=71),
    device(38, "Backyard Camera", 12, "camera", is_on=1, battery_level=58),
    device(39, "Living Room Blinds", 1, "blind", position=100),
    device(40, "Primary Bedroom Blinds", 7, "blind", position=0),
    device(41, "Office Blinds", 9, "blind", position=50),
]

USERS = [
    (1, "Jordan Rivera", "jordan@riverahome.example", "owner", "2024-10-01 12:00:00"),
    (2, "Sam Rivera", "sam@riverahome.example", "member", "2024-10-01 12:05:00"),
    (3, "Leah Rivera", "leah@riverahome.example", "member", "2024-12-24 18:00:00"),
    (4, "Rosa Alvarez", "rosa.alvarez@example.com", "member", "2025-02-02 10:00:00"),
]

# id, name, description, created_by, created_at, last_activated_at, actions [(device_id, action, value)]
SCENES = [
    (1, "Movie Night", "Dim the living room and close the blinds.", 1, "2024-10-05 20:00:00", "2025-06-07 20:31:00",
     [(1, "set_brightness", 20.0), (2, "set_brightness", 35.0), (39, "set_position", 0.0), (36, "turn_on", None), (3, "turn_off", None)]),
    (2, "Good Morning", "Open the blinds, kitchen lights and coffee.", 1, "2024-10-05 20:10:00", "2025-06-12 06:45:00",
     [(39, "set_position", 100.0), (40, "set_position", 100.0), (3, "turn_on", None), (35, "turn_on", None), (15, "set_temperature", 21.0)]),
    (3, "Good Night", "Lights off, doors locked, heating down.", 1, "2024-10-05 20:20:00", "2025-06-11 22:30:00",
     [(1, "turn_off", None), (2, "turn_off", None), (3, "turn_off", None), (6, "turn_off", None), (17, "lock", None), (18, "lock", None), (31, "turn_off", None), (15, "set_temperature", 18.0), (16, "set_temperature", 18.0)]),
    (4, "Office Morning", "Warm up the office before work.", 2, "2024-11-12 07:00:00", "2025-06-12 07:30:00",
     [(10, "set_brightness", 90.0), (41, "set_position", 80.0), (31, "turn_on", None)]),
    (5, "Winter Evening", "Cozy living room with extra heat.", 2, "2024-11-20 17:00:00", "2025-06-11 20:52:00",
     [(2, "set_brightness", 50.0), (31, "turn_on", None), (15, "set_temperature", 22.0)]),
    (6, "Work Focus", "Bright, cool office light.", 2, "2025-01-08 09:00:00", "2025-06-12 09:00:00",
     [(10, "set_brightness", 100.0), (11, "turn_on", None), (41, "set_position", 100.0)]),
    (7, "Party Mode", "Backyard and dining lights for guests.", 3, "2025-03-01 18:00:00", "2025-05-24 19:00:00",
     [(13, "turn_on", None), (33, "turn_on", None), (36, "turn_on", None), (5, "set_brightness", 100.0)]),
    (8, "Night Path", "Soft light on the way to the bathroom.", 1, "2025-01-15 23:00:00", "2025-06-06 03:12:00",
     [(7, "set_brightness", 15.0), (9, "turn_on", None)]),
    (9, "Welcome Home", "Entry and living room lights on arrival.", 1, "2024-10-06 18:00:00", "2025-06-11 18:04:00",
     [(6, "turn_on", None), (1, "set_brightness", 70.0), (36, "turn_on", None)]),
    (10, "Garage Alert Lights", "Light up the garage when its door opens.", 2, "2025-02-10 19:00:00", "2025-06-10 07:15:00",
     [(12, "turn_on", None)]),
]

# id, name, trigger_type, trigger_time, days, trigger_device_id, trigger_event, scene_id, is_enabled, last_triggered_at
AUTOMATIONS = [
    (1, "Weekday Morning", "time", "06:45", "weekdays", None, None, 2, 1, "2025-06-12 06:45:00"),
    (2, "Bedtime", "time", "22:30", "daily", None, None, 3, 1, "2025-06-11 22:30:00"),
    (3, "Office Warm-up", "time", "07:30", "weekdays", None, None, 4, 1, "2025-06-12 07:30:00"),
    (4, "Winter Evening Comfort", "sunset", None, "daily", None, None, 5, 1, "2025-06-11 20:52:00"),
    (5, "Upstairs Night Path", "device_event", None, "daily", 28, "motion_detected", 8, 1, "2025-06-06 03:12:00"),
    (6, "Garage Door Opened", "device_event", None, "daily", 27, "door_opened", 10, 1, "2025-06-10 07:15:00"),
    (7, "Entry Welcome", "device_event", None, "daily", 21, "motion_detected", 9, 1, "2025-06-11 18:04:00"),
    (8, "Weekend Party", "time", "19:00", "weekends", None, None, 7, 0, "2025-05-24 19:00:00"),
    (9, "Guest Arrival Lights", "time", "15:00", "daily", None, None, 9, 0, None),
    (10, "Focus Time", "time", "09:00", "weekdays", None, None, 6, 1, "2025-06-12 09:00:00"),
]

# Daily kWh from 2025-06-01 to 2025-06-10 for metered devices.
ENERGY = {
    15: [7.8, 7.2, 6.9, 6.5, 6.1, 5.8, 5.6, 5.9, 6.2, 6.4],
    16: [4.1, 3.9, 3.6, 3.4, 3.3, 3.1, 3.0, 3.2, 3.5, 3.6],
    29: [0.9, 0.0, 1.2, 0.0, 0.8, 1.1, 0.0, 0.9, 0.0, 1.0],
    30: [2.2, 2.3, 2.1, 2.4, 2.2, 2.3, 2.1, 2.5, 2.6, 2.4],
    31: [3.1, 2.9, 2.8, 2.6, 2.4, 1.8, 1.7, 0.2, 0.1, 0.1],
    32: [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
    33: [0.0, 0.0, 0.0, 0.0, 0.0, 0.4, 0.4, 0.0, 0.0, 0.0],
    34: [1.5, 1.4, 1.5, 1.6, 1.5, 1.4, 1.5, 1.6, 1.5, 1.5],
    35: [0.3, 0.3, 0.3, 0.3, 0.3, 0.2, 0.2, 0.3, 0.3, 0.3],
    36: [0.4, 0.3, 0.3, 0.4, 0.5, 0.9, 0.8, 0.3, 0.4, 0.3],
}

ALERTS = [
    (1, 23, "leak_detected", "critical", "Water detected under the washing machine", "open", "2025-06-12 07:42:00", None, None, None),
    (2, 24, "leak_detected", "critical", "Water detected near the sump pump", "resolved", "2025-05-18 06:10:00", 1, "Sump pump float fixed", "2025-05-18 12:00:00"),
    (3, 24, "battery_low", "warning", "Basement Leak Sensor battery at 11%", "open", "2025-06-10 08:00:00", None, None, None),
    (4, 19, "battery_low", "warning", "Garage Side Door Lock battery at 14%", "open", "2025-06-09 08:00:00", None, None, None),
    (5, 27, "battery_low", "warning", "Garage Door Contact Sensor battery at 18%", "acknowledged", "2025-06-08 08:00:00", 2, "Will replace this weekend", None),
    (6, 28, "battery_low", "warning", "Upstairs Motion Sensor battery at 3%", "open", "2025-06-05 08:00:00", None, None, None),
    (7, 28, "offline", "warning", "Upstairs Motion Sensor has not reported for 48 hours", "open", "2025-06-09 21:13:00", None, None, None),
    (8, 12, "offline", "warning", "Garage Light is unreachable", "open", "2025-06-11 19:30:00", None, None, None),
    (9, 22, "door_left_open", "info", "Front door open for 10 minutes", "resolved", "2025-06-08 17:20:00", 3, None, "2025-06-08 17:31:00"),
    (10, 25, "motion_detected", "info", "Motion in the backyard at 02:14", "acknowledged", "2025-06-10 02:14:00", 1, "Probably the neighbour's cat", None),
    (11, 15, "firmware_update", "info", "Firmware 4.8.1 is available for Living Room Thermostat", "open", "2025-06-03 10:00:00", None, None, None),
]

GUEST_ACCESS = [
    (1, "Sam Patel (dog walker)", "sam.patel@example.com", 17, "5521", "2025-03-01 08:00", "2025-12-31 20:00", "active", 1, "2025-02-27 18:00:00"),
    (2, "Sam Patel (dog walker)", "sam.patel@example.com", 20, "5521", "2025-03-01 08:00", "2025-12-31 20:00", "active", 1, "2025-02-27 18:01:00"),
    (3, "Sam Patel (dog walker)", "sam.patel@example.com", 19, "5521", "2025-01-10 08:00", "2025-02-28 20:00", "revoked", 1, "2025-01-09 12:00:00"),
    (4, "Maria Lopez (CleanCo)", "maria@cleanco.example", 17, "7310", "2025-01-01 08:00", "2025-12-31 18:00", "active", 2, "2024-12-30 09:00:00"),
    (5, "Tom Becker (plumber)", None, 17, "1188", "2025-05-02 09:00", "2025-05-02 17:00", "expired", 1, "2025-05-01 20:00:00"),
    (6, "Aunt Carmen", "carmen.r@example.com", 17, "2468", "2025-04-10 12:00", "2025-04-14 12:00", "expired", 2, "2025-04-08 19:00:00"),
]
# fmt: on


def _energy_rows():
    rows, n = [], 0
    for device_id in sorted(ENERGY):
        for day, kwh in enumerate(ENERGY[device_id], start=1):
            n += 1
            rows.append((n, device_id, f"2025-06-{day:02d}", kwh))
    return rows


TABLES = [
    {
        "table_name": "users",
        "reasoning": "Household members; user 1 (Jordan Rivera, owner) is the authenticated user.",
        "columns": ["id", "name", "email", "role", "created_at"],
        "rows": USERS,
    },
    {
        "table_name": "rooms",
        "reasoning": "Rooms on the basement (-1), ground (0) and upper (1) floors.",
        "columns": ["id", "name", "floor"],
        "rows": ROOMS,
    },
    {
        "table_name": "devices",
        "reasoning": "41 devices of every type with their current state; two are offline and four "
        "battery devices are below 20%.",
        "columns": DEVICE_COLUMNS,
        "rows": DEVICES,
    },
    {
        "table_name": "scenes",
        "reasoning": "Saved scenes; the Space Heater Plug is turned on by two scenes and off by one.",
        "columns": ["id", "name", "description", "created_by", "created_at", "last_activated_at"],
        "rows": [s[:6] for s in SCENES],
    },
    {
        "table_name": "scene_actions",
        "reasoning": "One action per device and scene (value = brightness %, temperature in C or blind position %).",
        "columns": ["id", "scene_id", "device_id", "action", "value"],
        "rows": [
            (n, scene_id, d, a, v)
            for n, (scene_id, d, a, v) in enumerate(
                ((s[0],) + act for s in SCENES for act in s[6]), start=1
            )
        ],
    },
    {
        "table_name": "automations",
        "reasoning": "Time, sun and sensor-triggered automations that run scenes; two are disabled.",
        "columns": [
            "id",
            "name",
            "trigger_type",
            "trigger_time",
            "days",
            "trigger_device_id",
            "trigger_event",
            "scene_id",
            "is_enabled",
            "last_triggered_at",
        ],
        "rows": AUTOMATIONS,
    },
    {
        "table_name": "energy_readings",
        "reasoning": "Daily consumption for June 1-10, 2025. Among plugs the space heater leads for "
        "June 1-7 while the dehumidifier leads over the full ten days.",
        "columns": ["id", "device_id", "reading_date", "kwh"],
        "rows": _energy_rows(),
    },
    {
        "table_name": "alerts",
        "reasoning": "Open, acknowledged and resolved alerts (leak, low battery, offline, firmware).",
        "columns": [
            "id",
            "device_id",
            "alert_type",
            "severity",
            "message",
            "status",
            "created_at",
            "acknowledged_by",
            "note",
            "resolved_at",
        ],
        "rows": ALERTS,
    },
    {
        "table_name": "guest_access",
        "reasoning": "Door codes for the dog walker, the cleaner and past visitors.",
        "columns": [
            "id",
            "guest_name",
            "guest_email",
            "lock_device_id",
            "access_code",
            "valid_from",
            "valid_until",
            "status",
            "created_by",
            "created_at",
        ],
        "rows": GUEST_ACCESS,
    },
]
