"""SQLite schema of the smart_home_1 world (HearthHub)."""

TABLES = [
    {
        "name": "users",
        "ddl": """CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);""",
        "indexes": [],
    },
    {
        "name": "rooms",
        "ddl": """CREATE TABLE rooms (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    floor INTEGER NOT NULL
);""",
        "indexes": ["CREATE INDEX idx_rooms_floor ON rooms(floor);"],
    },
    {
        "name": "devices",
        "ddl": """CREATE TABLE devices (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    room_id INTEGER NOT NULL,
    device_type TEXT NOT NULL CHECK (device_type IN ('light', 'thermostat', 'lock', 'sensor', 'plug', 'camera', 'blind', 'speaker')),
    manufacturer TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'online' CHECK (status IN ('online', 'offline')),
    is_on INTEGER,
    brightness INTEGER CHECK (brightness BETWEEN 0 AND 100),
    color_temp_k INTEGER,
    target_temp_c REAL,
    current_temp_c REAL,
    hvac_mode TEXT CHECK (hvac_mode IN ('heat', 'cool', 'auto', 'off')),
    is_locked INTEGER,
    position INTEGER CHECK (position BETWEEN 0 AND 100),
    battery_level INTEGER CHECK (battery_level BETWEEN 0 AND 100),
    sensor_kind TEXT CHECK (sensor_kind IN ('motion', 'contact', 'leak', 'smoke')),
    firmware_version TEXT,
    last_seen_at TEXT,
    FOREIGN KEY (room_id) REFERENCES rooms(id)
);""",
        "indexes": [
            "CREATE INDEX idx_devices_room_id ON devices(room_id);",
            "CREATE INDEX idx_devices_type ON devices(device_type);",
        ],
    },
    {
        "name": "scenes",
        "ddl": """CREATE TABLE scenes (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    description TEXT,
    created_by INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    last_activated_at TEXT,
    FOREIGN KEY (created_by) REFERENCES users(id)
);""",
        "indexes": [],
    },
    {
        "name": "scene_actions",
        "ddl": """CREATE TABLE scene_actions (
    id INTEGER PRIMARY KEY,
    scene_id INTEGER NOT NULL,
    device_id INTEGER NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('turn_on', 'turn_off', 'set_brightness', 'set_temperature', 'lock', 'unlock', 'set_position')),
    value REAL,
    FOREIGN KEY (scene_id) REFERENCES scenes(id) ON DELETE CASCADE,
    FOREIGN KEY (device_id) REFERENCES devices(id),
    UNIQUE (scene_id, device_id)
);""",
        "indexes": ["CREATE INDEX idx_scene_actions_device_id ON scene_actions(device_id);"],
    },
    {
        "name": "automations",
        "ddl": """CREATE TABLE automations (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    trigger_type TEXT NOT NULL CHECK (trigger_type IN ('time', 'sunrise', 'sunset', 'device_event')),
    trigger_time TEXT,
    days TEXT NOT NULL DEFAULT 'daily',
    trigger_device_id INTEGER,
    trigger_event TEXT CHECK (trigger_event IN ('motion_detected', 'door_opened', 'leak_detected', 'smoke_detected')),
    scene_id INTEGER NOT NULL,
    is_enabled INTEGER NOT NULL DEFAULT 1,
    last_triggered_at TEXT,
    FOREIGN KEY (trigger_device_id) REFERENCES devices(id),
    FOREIGN KEY (scene_id) REFERENCES scenes(id)
);""",
        "indexes": [
            "CREATE INDEX idx_automations_scene_id ON automations(scene_id);",
            "CREATE INDEX idx_automations_trigger_device_id ON automations(trigger_device_id);",
        ],
    },
    {
        "name": "energy_readings",
        "ddl": """CREATE TABLE energy_readings (
    id INTEGER PRIMARY KEY,
    device_id INTEGER NOT NULL,
    reading_date TEXT NOT NULL,
    kwh REAL NOT NULL CHECK (kwh >= 0),
    FOREIGN KEY (device_id) REFERENCES devices(id),
    UNIQUE (device_id, reading_date)
);""",
        "indexes": ["CREATE INDEX idx_energy_readings_date ON energy_readings(reading_date);"],
    },
    {
        "name": "alerts",
        "ddl": """CREATE TABLE alerts (
    id INTEGER PRIMARY KEY,
    device_id INTEGER NOT NULL,
    alert_type TEXT NOT NULL CHECK (alert_type IN ('battery_low', 'offline', 'leak_detected', 'door_left_open', 'motion_detected', 'smoke_detected', 'firmware_update')),
    severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    message TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'acknowledged', 'resolved')),
    created_at TEXT NOT NULL,
    acknowledged_by INTEGER,
    note TEXT,
    resolved_at TEXT,
    FOREIGN KEY (device_id) REFERENCES devices(id),
    FOREIGN KEY (acknowledged_by) REFERENCES users(id)
);""",
        "indexes": [
            "CREATE INDEX idx_alerts_status ON alerts(status);",
            "CREATE INDEX idx_alerts_device_id ON alerts(device_id);",
        ],
    },
    {
        "name": "guest_access",
        "ddl": """CREATE TABLE guest_access (
    id INTEGER PRIMARY KEY,
    guest_name TEXT NOT NULL,
    guest_email TEXT,
    lock_device_id INTEGER NOT NULL,
    access_code TEXT NOT NULL,
    valid_from TEXT NOT NULL,
    valid_until TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked', 'expired')),
    created_by INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (lock_device_id) REFERENCES devices(id),
    FOREIGN KEY (created_by) REFERENCES users(id)
);""",
        "indexes": ["CREATE INDEX idx_guest_access_lock ON guest_access(lock_device_id, status);"],
    },
]
