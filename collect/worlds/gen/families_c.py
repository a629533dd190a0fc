"""Families: smart home, workflow automation (see :mod:`collect.worlds.gen.spec`)."""

from collect.worlds.gen.spec import family, machine
from collect.worlds.gen.spec import field as f
from collect.worlds.gen.spec import variant as v

SMART_HOME = family(
    "smart_home",
    [
        ("NestWorks", "a smart home hub for a family house"),
        ("HomeGrid", "a building automation console for a small apartment block"),
        ("CasaLink", "a smart home app for a holiday rental"),
    ],
    ["nestworks.home", "homegrid.io", "casalink.example.com"],
    {
        "person": [
            v(
                ("resident", "residents"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("email", ["email"], "email"),
                    f("active", ["is_active", "has_access"], "bool", 0.85),
                    f("role", ["role"], "enum", ["owner", "adult", "child", "guest"]),
                ],
            ),
            v(
                ("installer", "installers"),
                [
                    f("name", ["name"], "person"),
                    f("email", ["email", "contact_email"], "email"),
                    f("active", ["is_active", "on_call"], "bool", 0.85),
                    f("license", ["license_no", "certificate"], "code", "LIC", opt=0.5),
                ],
            ),
        ],
        "party": [
            v(
                ("manufacturer", "manufacturers"),
                [
                    f(
                        "name",
                        ["name", "brand"],
                        "pool",
                        [
                            "Lumio",
                            "Thermex",
                            "SecureOne",
                            "Voltix",
                            "AeroBlind",
                            "Sonora",
                            "Kelvyn",
                            "Brightway",
                            "Hexa Home",
                            "Nordlys",
                        ],
                    ),
                    f("attr", ["warranty_years", "warranty"], "int", (1, 6)),
                ],
            ),
            v(
                ("supplier", "suppliers"),
                [
                    f(
                        "name",
                        ["name", "shop_name"],
                        "title",
                        (
                            ["Volt", "Spark", "Home", "Smart", "Bright", "Wired"],
                            ["Depot", "Store", "Outlet", "Center", "Mart"],
                        ),
                    ),
                    f(
                        "attr",
                        ["support_level", "support_tier"],
                        "enum",
                        ["email", "phone", "onsite"],
                    ),
                ],
            ),
        ],
        "group": [
            v(
                ("room", "rooms"),
                [
                    f(
                        "name",
                        ["name", "room_name"],
                        "pool",
                        [
                            "Kitchen",
                            "Living Room",
                            "Master Bedroom",
                            "Kids Room",
                            "Garage",
                            "Hallway",
                            "Office",
                            "Basement",
                            "Patio",
                            "Laundry",
                        ],
                    ),
                    f("attr", ["floor", "storey"], "int", (-1, 3)),
                ],
            ),
            v(
                ("zone", "zones"),
                [
                    f(
                        "name",
                        ["name", "zone_name"],
                        "pool",
                        [
                            "Ground Floor",
                            "Upstairs",
                            "Outdoor",
                            "Security Perimeter",
                            "Guest Wing",
                            "Utility",
                            "Entertainment",
                            "Night Zone",
                        ],
                    ),
                    f("attr", ["priority", "alarm_priority"], "enum", ["low", "normal", "high"]),
                ],
            ),
        ],
        "item": [
            v(
                ("device", "devices"),
                [
                    f(
                        "name",
                        ["name", "label"],
                        "title",
                        (
                            [
                                "Kitchen",
                                "Porch",
                                "Hall",
                                "Desk",
                                "Ceiling",
                                "Window",
                                "Garden",
                                "Garage",
                            ],
                            [
                                "Light",
                                "Sensor",
                                "Plug",
                                "Camera",
                                "Thermostat",
                                "Lock",
                                "Speaker",
                                "Blind",
                            ],
                        ),
                    ),
                    f(
                        "level",
                        ["kind", "device_type"],
                        "enum",
                        ["light", "sensor", "plug", "camera", "lock"],
                    ),
                    f("battery", ["battery_pct", "battery_level"], "int", (5, 100), null=0.4),
                    f("firmware", ["firmware", "firmware_version"], "code", "FW", opt=0.6),
                ],
                links={
                    "person": ["owner_id", "installed_by"],
                    "party": ["manufacturer_id", "supplier_id"],
                    "group": ["room_id", "zone_id"],
                },
                state=machine(
                    ["status", "state"],
                    ["pending_setup", "online", "offline", "maintenance", "retired"],
                    [
                        ("activate", ["pending_setup", "offline"], "online", ["activated_at"]),
                        ("take_offline", ["online"], "offline", None),
                        (
                            "start_maintenance",
                            ["online", "offline"],
                            "maintenance",
                            ["maintenance_since"],
                        ),
                        ("finish_maintenance", ["maintenance"], "online", None),
                        ("retire", ["offline", "maintenance"], "retired", ["retired_at"]),
                    ],
                    open_state="online",
                    close="start_maintenance",
                    weights=[1, 5, 2, 2, 1],
                ),
            ),
        ],
        "child": [
            v(
                ("event", "events"),
                [
                    f(
                        "body",
                        ["message", "details"],
                        "text",
                        [
                            "Battery below 20%.",
                            "Motion detected at night.",
                            "Firmware update available.",
                            "Connection lost for 5 minutes.",
                            "Door left unlocked.",
                            "Temperature spike.",
                        ],
                    ),
                    f("severity", ["severity"], "enum", ["info", "warning", "critical"]),
                ],
                links={"item": ["device_id"], "person": ["acknowledged_by"]},
            ),
        ],
    },
    [
        v(
            ("scene", "scenes"),
            [
                f(
                    "name",
                    ["name", "scene_name"],
                    "pool",
                    ["Good Morning", "Movie Night", "Away", "Dinner", "Sleep", "Party"],
                ),
                f("enabled", ["is_enabled", "enabled"], "bool", 0.8),
            ],
            links={"group": ["room_id", "zone_id"]},
        ),
        v(
            ("schedule", "schedules"),
            [
                f(
                    "name",
                    ["name"],
                    "pool",
                    ["Weekday Wake", "Weekend Lights", "Vacation Mode", "Night Lock", "Sprinklers"],
                ),
                f("hour", ["run_hour", "hour"], "int", (0, 23)),
                f("days", ["days"], "enum", ["daily", "weekdays", "weekends"]),
            ],
        ),
        v(
            ("energy_plan", "energy_plans"),
            [
                f(
                    "name",
                    ["name", "plan_name"],
                    "pool",
                    ["Flat Rate", "Night Saver", "Green Tariff", "Peak Shaver"],
                ),
                f("price", ["price_per_kwh", "kwh_price"], "money", (0.08, 0.45)),
            ],
        ),
    ],
)

WORKFLOW = family(
    "workflow_automation",
    [
        ("FlowForge", "a no-code workflow automation service"),
        ("ZapLane", "an integration platform that connects business apps"),
        ("TaskRelay", "an internal automation runner for an operations team"),
    ],
    ["flowforge.dev", "zaplane.io", "taskrelay.example.org"],
    {
        "person": [
            v(
                ("builder", "builders"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("email", ["email"], "email"),
                    f("active", ["is_active", "active"], "bool", 0.85),
                    f("role", ["role"], "enum", ["viewer", "editor", "admin"]),
                ],
            ),
            v(
                ("operator", "operators"),
                [
                    f("name", ["name", "display_name"], "person"),
                    f("email", ["email", "login_email"], "email"),
                    f("active", ["is_active", "enabled"], "bool", 0.85),
                    f(
                        "timezone",
                        ["timezone"],
                        "enum",
                        ["UTC", "Europe/Paris", "Asia/Tokyo"],
                        opt=0.6,
                    ),
                ],
            ),
        ],
        "party": [
            v(
                ("connection", "connections"),
                [
                    f(
                        "name",
                        ["name", "connection_name"],
                        "title",
                        (
                            [
                                "Salesforce",
                                "Slack",
                                "Gmail",
                                "Stripe",
                                "Jira",
                                "HubSpot",
                                "Notion",
                                "Airtable",
                            ],
                            ["Prod", "Sandbox", "Marketing", "Finance", "Support"],
                        ),
                    ),
                    f("attr", ["auth_type", "auth_method"], "enum", ["oauth", "api_key", "basic"]),
                    f(
                        "expires",
                        ["expires_on", "token_expiry"],
                        "date",
                        (-10, 200),
                        null=0.2,
                        opt=0.7,
                    ),
                ],
            ),
            v(
                ("app", "apps"),
                [
                    f(
                        "name",
                        ["name", "app_name"],
                        "pool",
                        [
                            "Shopify",
                            "Zendesk",
                            "Trello",
                            "Dropbox",
                            "Mailchimp",
                            "Asana",
                            "Twilio",
                            "QuickBooks",
                            "Intercom",
                            "GitHub",
                        ],
                    ),
                    f("attr", ["rate_limit_per_min", "rate_limit"], "int", (10, 600)),
                ],
            ),
        ],
        "group": [
            v(
                ("folder", "folders"),
                [
                    f(
                        "name",
                        ["name", "folder_name"],
                        "pool",
                        [
                            "Sales Ops",
                            "Marketing",
                            "Finance",
                            "Support",
                            "HR",
                            "Engineering",
                            "Shared",
                            "Archive",
                        ],
                    ),
                    f("attr", ["visibility", "sharing"], "enum", ["private", "team", "company"]),
                ],
            ),
            v(
                ("project", "projects"),
                [
                    f(
                        "name",
                        ["name", "project_name"],
                        "pool",
                        [
                            "Lead Routing",
                            "Invoice Sync",
                            "Onboarding",
                            "Alerts",
                            "Reporting",
                            "Data Cleanup",
                            "Renewals",
                        ],
                    ),
                    f("attr", ["monthly_task_quota", "task_quota"], "int", (100, 20000)),
                ],
            ),
        ],
        "item": [
            v(
                ("workflow", "workflows"),
                [
                    f(
                        "name",
                        ["name", "title"],
                        "title",
                        (
                            [
                                "Sync",
                                "Notify on",
                                "Archive",
                                "Route",
                                "Enrich",
                                "Backup",
                                "Escalate",
                                "Tag",
                            ],
                            [
                                "new leads",
                                "failed payments",
                                "closed tickets",
                                "signed contracts",
                                "new hires",
                                "overdue invoices",
                                "form replies",
                                "bug reports",
                            ],
                        ),
                    ),
                    f(
                        "level",
                        ["trigger_type", "trigger"],
                        "enum",
                        ["schedule", "webhook", "app_event", "manual"],
                    ),
                    f("runs", ["run_count", "total_runs"], "int", (0, 5000)),
                    f("retries", ["max_retries", "retry_limit"], "int", (0, 5), opt=0.7),
                ],
                links={
                    "person": ["owner_id", "maintainer_id"],
                    "party": ["connection_id", "app_id"],
                    "group": ["folder_id", "project_id"],
                },
                state=machine(
                    ["status", "state"],
                    ["draft", "active", "paused", "failing", "archived"],
                    [
                        ("publish", ["draft"], "active", ["published_at"]),
                        ("pause", ["active", "failing"], "paused", ["paused_at"]),
                        ("resume", ["paused"], "active", None),
                        ("archive", ["draft", "paused"], "archived", ["archived_at"]),
                        ("flag_failing", ["active"], "failing", None),
                    ],
                    open_state="active",
                    close="pause",
                    weights=[2, 5, 2, 1, 1],
                ),
            ),
        ],
        "child": [
            v(
                ("run", "runs"),
                [
                    f(
                        "body",
                        ["log_message", "summary"],
                        "text",
                        [
                            "Completed in 2.1 s.",
                            "Retried after timeout.",
                            "Skipped: filter not matched.",
                            "Failed: 401 from the app.",
                            "Completed with warnings.",
                            "Rate limited, retried.",
                        ],
                    ),
                    f("duration", ["duration_ms", "elapsed_ms"], "int", (50, 9000)),
                ],
                links={"item": ["workflow_id"]},
            ),
        ],
    },
    [
        v(
            ("variable", "variables"),
            [
                f(
                    "name",
                    ["key", "name"],
                    "pool",
                    ["SUPPORT_EMAIL", "SLACK_CHANNEL", "REGION", "API_BASE", "RETRY_DELAY"],
                ),
                f("secret", ["is_secret", "secret"], "bool", 0.3),
            ],
            links={"group": ["folder_id", "project_id"]},
        ),
        v(
            ("webhook", "webhooks"),
            [
                f(
                    "name",
                    ["name", "endpoint_name"],
                    "pool",
                    ["orders-in", "crm-events", "billing-hooks", "deploys", "signups"],
                ),
                f("secret_rotation", ["rotation_days", "rotate_every_days"], "int", (7, 180)),
            ],
        ),
        v(
            ("template", "templates"),
            [
                f(
                    "name",
                    ["name", "template_name"],
                    "pool",
                    [
                        "Lead to Slack",
                        "Invoice to Sheet",
                        "Form to CRM",
                        "Daily Digest",
                        "Ticket Triage",
                    ],
                ),
                f("installs", ["install_count", "installs"], "int", (0, 900)),
            ],
        ),
    ],
)

FAMILIES = [SMART_HOME, WORKFLOW]
