"""Families: scheduling, CRM (see :mod:`collect.worlds.gen.spec`)."""

from collect.worlds.gen.spec import family, machine
from collect.worlds.gen.spec import field as f
from collect.worlds.gen.spec import variant as v

SCHEDULING = family(
    "scheduling",
    [
        ("SlotWise", "appointment scheduling for a physiotherapy clinic"),
        ("BookBay", "room and resource booking for a coworking space"),
        ("CrewCal", "job scheduling for a home-repair company"),
    ],
    ["slotwise.health", "bookbay.co", "crewcal.example.com"],
    {
        "person": [
            v(
                ("practitioner", "practitioners"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("email", ["email"], "email"),
                    f("active", ["is_active", "accepting_bookings"], "bool", 0.85),
                    f(
                        "specialty",
                        ["specialty"],
                        "enum",
                        ["sports", "rehab", "pediatric", "general"],
                    ),
                ],
            ),
            v(
                ("host", "hosts"),
                [
                    f("name", ["name", "display_name"], "person"),
                    f("email", ["email"], "email"),
                    f("active", ["is_active", "active"], "bool", 0.85),
                    f(
                        "timezone",
                        ["timezone"],
                        "enum",
                        ["UTC", "Europe/Berlin", "America/New_York"],
                        opt=0.6,
                    ),
                ],
            ),
        ],
        "party": [
            v(
                ("client", "clients"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("attr", ["membership", "tier"], "enum", ["standard", "silver", "gold"]),
                    f("visits", ["visit_count", "visits"], "int", (0, 60), opt=0.6),
                ],
            ),
            v(
                ("member", "members"),
                [
                    f("name", ["name"], "person"),
                    f("attr", ["credits", "credit_balance"], "int", (0, 40)),
                    f(
                        "company",
                        ["company"],
                        "pool",
                        ["Solo", "Inkwell", "Pixelforge", "Brightpath", "Nomad"],
                        opt=0.5,
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
                            "Cedar",
                            "Birch",
                            "Willow",
                            "Aspen",
                            "Spruce",
                            "Maple Hall",
                            "Studio 1",
                            "Studio 2",
                            "Loft",
                        ],
                    ),
                    f("attr", ["capacity", "seats"], "int", (2, 30)),
                    f("floor", ["floor"], "int", (0, 4), opt=0.6),
                ],
            ),
            v(
                ("service", "services"),
                [
                    f(
                        "name",
                        ["name", "service_name"],
                        "pool",
                        [
                            "Initial Assessment",
                            "Follow-up",
                            "Massage",
                            "Dry Needling",
                            "Gait Analysis",
                            "Group Class",
                            "Telehealth Check-in",
                            "Shockwave Therapy",
                        ],
                    ),
                    f("attr", ["duration_minutes", "minutes"], "int", (15, 120)),
                    f("price", ["price", "fee"], "money", (30, 180), opt=0.7),
                ],
            ),
        ],
        "item": [
            v(
                ("appointment", "appointments"),
                [
                    f(
                        "name",
                        ["title", "label"],
                        "title",
                        (
                            [
                                "Morning",
                                "Lunchtime",
                                "Afternoon",
                                "Evening",
                                "Weekend",
                                "Early",
                                "Late",
                                "Quick",
                            ],
                            [
                                "check-up",
                                "session",
                                "consult",
                                "review",
                                "workshop",
                                "planning",
                                "sync",
                                "demo",
                            ],
                        ),
                    ),
                    f(
                        "level",
                        ["kind", "visit_type"],
                        "enum",
                        ["in_person", "video", "phone", "home_visit"],
                    ),
                    f("starts_on", ["date", "scheduled_for"], "date", (-10, 25)),
                    f("slot", ["start_hour", "hour"], "int", (8, 18)),
                ],
                links={
                    "person": ["practitioner_id", "host_id"],
                    "party": ["client_id", "member_id"],
                    "group": ["room_id", "service_id"],
                },
                state=machine(
                    ["status", "state"],
                    ["requested", "confirmed", "checked_in", "completed", "cancelled", "no_show"],
                    [
                        ("confirm", ["requested"], "confirmed", ["confirmed_at"]),
                        ("check_in", ["confirmed"], "checked_in", ["checked_in_at"]),
                        ("complete", ["checked_in"], "completed", None),
                        ("cancel", ["requested", "confirmed"], "cancelled", ["cancelled_at"]),
                        ("mark_no_show", ["confirmed"], "no_show", None),
                    ],
                    open_state="confirmed",
                    close="cancel",
                    weights=[2, 4, 1, 3, 1, 1],
                ),
            ),
        ],
        "child": [
            v(
                ("note", "notes"),
                [
                    f(
                        "body",
                        ["body", "content"],
                        "text",
                        [
                            "Prefers afternoon slots.",
                            "Bring previous scans.",
                            "Parking validated.",
                            "Asked for a reminder SMS.",
                            "Rescheduled once already.",
                            "Needs step-free access.",
                        ],
                    ),
                ],
                links={"item": ["appointment_id"], "person": ["author_id"]},
            ),
        ],
    },
    [
        v(
            ("holiday", "holidays"),
            [
                f(
                    "name",
                    ["name"],
                    "pool",
                    [
                        "Spring Break",
                        "Summer Closure",
                        "Founders Day",
                        "Staff Training",
                        "Inventory Day",
                    ],
                ),
                f("day", ["date", "day"], "date", (1, 120)),
            ],
        ),
        v(
            ("resource", "resources"),
            [
                f(
                    "name",
                    ["name", "resource_name"],
                    "pool",
                    ["Projector", "Ultrasound Unit", "Whiteboard", "Treadmill", "Camera Kit"],
                ),
                f("quantity", ["quantity", "units"], "int", (1, 6)),
            ],
            links={"group": ["room_id", "service_id"]},
        ),
        v(
            ("reminder_template", "reminder_templates"),
            [
                f(
                    "name",
                    ["name"],
                    "pool",
                    ["24h before", "2h before", "Day after", "Missed visit", "Welcome"],
                ),
                f("channel", ["channel"], "enum", ["sms", "email", "push"]),
                f("offset", ["offset_minutes", "lead_minutes"], "int", (-2880, 1440)),
            ],
        ),
    ],
)

CRM = family(
    "crm",
    [
        ("PipeLine Pro", "a sales CRM for a B2B software company"),
        ("DealDesk", "a CRM for a commercial real-estate broker"),
        ("ClientHub", "a CRM for a marketing agency"),
    ],
    ["pipelinepro.com", "dealdesk.io", "clienthub.example.net"],
    {
        "person": [
            v(
                ("sales_rep", "sales_reps"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("email", ["email"], "email"),
                    f("active", ["is_active", "active"], "bool", 0.85),
                    f("region", ["region", "territory"], "enum", ["emea", "amer", "apac"]),
                    f("quota", ["quota", "annual_quota"], "money", (100000, 900000), opt=0.6),
                ],
            ),
            v(
                ("account_manager", "account_managers"),
                [
                    f("name", ["name"], "person"),
                    f("email", ["email", "work_email"], "email"),
                    f("active", ["is_active", "enabled"], "bool", 0.85),
                    f("team", ["team"], "enum", ["new_business", "growth", "retention"]),
                ],
            ),
        ],
        "party": [
            v(
                ("account", "accounts"),
                [
                    f(
                        "name",
                        ["name", "account_name"],
                        "title",
                        (
                            [
                                "Quantum",
                                "Stellar",
                                "Nimbus",
                                "Horizon",
                                "Pinnacle",
                                "Lumen",
                                "Zephyr",
                                "Everest",
                            ],
                            [
                                "Analytics",
                                "Health",
                                "Robotics",
                                "Energy",
                                "Capital",
                                "Media",
                                "Retail",
                            ],
                        ),
                    ),
                    f(
                        "attr",
                        ["industry", "sector"],
                        "enum",
                        ["software", "finance", "healthcare", "retail", "energy"],
                    ),
                    f("employees", ["employee_count", "headcount"], "int", (10, 20000), opt=0.7),
                ],
            ),
            v(
                ("company", "companies"),
                [
                    f(
                        "name",
                        ["name", "legal_name"],
                        "title",
                        (
                            [
                                "Blue Harbor",
                                "Oak Ridge",
                                "Silver Creek",
                                "Granite Peak",
                                "Cedar Point",
                                "Iron Gate",
                            ],
                            ["Holdings", "Group", "Ventures", "Properties", "Industries"],
                        ),
                    ),
                    f("attr", ["tier", "segment"], "enum", ["smb", "mid_market", "enterprise"]),
                    f("founded", ["founded_year", "year_founded"], "int", (1950, 2022), opt=0.5),
                ],
            ),
        ],
        "group": [
            v(
                ("pipeline", "pipelines"),
                [
                    f(
                        "name",
                        ["name"],
                        "pool",
                        [
                            "New Logo",
                            "Expansion",
                            "Renewals",
                            "Partners",
                            "Public Sector",
                            "Self-Serve",
                            "Channel",
                        ],
                    ),
                    f("attr", ["target_win_rate", "win_rate_target"], "int", (10, 60)),
                ],
            ),
            v(
                ("campaign", "campaigns"),
                [
                    f(
                        "name",
                        ["name", "campaign_name"],
                        "pool",
                        [
                            "Spring Webinar",
                            "Trade Show 2025",
                            "Cold Outreach Q2",
                            "Customer Referral",
                            "Partner Summit",
                            "Product Launch",
                            "Holiday Promo",
                        ],
                    ),
                    f("attr", ["budget", "spend_budget"], "int", (1000, 90000)),
                ],
            ),
        ],
        "item": [
            v(
                ("deal", "deals"),
                [
                    f(
                        "name",
                        ["name", "title"],
                        "title",
                        (
                            [
                                "Annual",
                                "Pilot",
                                "Multi-year",
                                "Upsell",
                                "Renewal",
                                "Regional",
                                "Global",
                                "Starter",
                            ],
                            [
                                "license",
                                "rollout",
                                "support plan",
                                "platform deal",
                                "add-on",
                                "migration",
                                "bundle",
                            ],
                        ),
                    ),
                    f(
                        "level",
                        ["stage_priority", "priority"],
                        "enum",
                        ["low", "medium", "high", "strategic"],
                    ),
                    f("amount", ["amount", "value"], "money", (1500, 250000)),
                    f("close_date", ["expected_close", "close_date"], "date", (-20, 90)),
                ],
                links={
                    "person": ["owner_id", "rep_id"],
                    "party": ["account_id", "company_id"],
                    "group": ["pipeline_id", "campaign_id"],
                },
                state=machine(
                    ["stage", "status"],
                    ["lead", "qualified", "proposal", "negotiation", "won", "lost"],
                    [
                        ("qualify", ["lead"], "qualified", None),
                        ("send_proposal", ["qualified"], "proposal", ["proposal_sent_at"]),
                        ("start_negotiation", ["proposal"], "negotiation", None),
                        ("mark_won", ["proposal", "negotiation"], "won", ["closed_at"]),
                        (
                            "mark_lost",
                            ["lead", "qualified", "proposal", "negotiation"],
                            "lost",
                            ["lost_at"],
                        ),
                    ],
                    open_state="qualified",
                    close="mark_lost",
                    weights=[2, 4, 2, 2, 1, 1],
                ),
            ),
        ],
        "child": [
            v(
                ("activity", "activities"),
                [
                    f(
                        "body",
                        ["summary", "note"],
                        "text",
                        [
                            "Intro call, interested in a demo.",
                            "Sent pricing sheet.",
                            "Follow-up email.",
                            "Procurement asked for security docs.",
                            "Champion left the company.",
                            "Legal review started.",
                        ],
                    ),
                    f("kind", ["kind", "activity_type"], "enum", ["call", "email", "meeting"]),
                ],
                links={"item": ["deal_id"], "person": ["logged_by"]},
            ),
        ],
    },
    [
        v(
            ("contact", "contacts"),
            [
                f("name", ["name", "full_name"], "person"),
                f(
                    "title",
                    ["job_title", "title"],
                    "pool",
                    ["CTO", "CFO", "VP Sales", "Buyer", "Office Manager", "Founder"],
                ),
                f("opted_in", ["email_opt_in", "subscribed"], "bool", 0.6),
            ],
        ),
        v(
            ("lead_source", "lead_sources"),
            [
                f(
                    "name",
                    ["name", "source_name"],
                    "pool",
                    ["Website", "Referral", "Event", "Outbound", "Partner", "Ads"],
                ),
                f("cost", ["cost_per_lead", "cpl"], "money", (5, 300)),
            ],
        ),
        v(
            ("product_line", "product_lines"),
            [
                f(
                    "name",
                    ["name"],
                    "pool",
                    ["Core", "Analytics Add-on", "Premium Support", "Training", "API Access"],
                ),
                f("list_price", ["list_price", "price"], "money", (99, 20000)),
            ],
            links={"group": ["pipeline_id", "campaign_id"]},
        ),
    ],
)

FAMILIES = [SCHEDULING, CRM]
