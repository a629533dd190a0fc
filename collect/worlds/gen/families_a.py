"""Families: ticketing, inventory (see :mod:`collect.worlds.gen.spec`)."""

from collect.worlds.gen.spec import family, machine
from collect.worlds.gen.spec import field as f
from collect.worlds.gen.spec import variant as v

_PRIORITY = ["low", "medium", "high", "urgent"]

TICKETING = family(
    "ticketing",
    [
        ("DeskFlow", "a customer support help desk"),
        ("TicketNest", "an IT service desk for a mid-size company"),
        ("SupportLoop", "a shared inbox and ticketing tool for a SaaS vendor"),
    ],
    ["deskflow.io", "supportloop.com", "helpdesk.example.org"],
    {
        "person": [
            v(
                ("agent", "agents"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("email", ["email", "work_email"], "email"),
                    f("active", ["is_active", "active"], "bool", 0.85),
                    f("role", ["role", "seniority"], "enum", ["tier1", "tier2", "lead"]),
                    f("phone", ["phone_ext", "extension"], "int", (100, 999), opt=0.5),
                ],
            ),
            v(
                ("technician", "technicians"),
                [
                    f("name", ["name", "display_name"], "person"),
                    f("email", ["email"], "email"),
                    f("active", ["is_active", "available"], "bool", 0.85),
                    f("shift", ["shift"], "enum", ["day", "evening", "night"]),
                ],
            ),
        ],
        "party": [
            v(
                ("customer", "customers"),
                [
                    f(
                        "name",
                        ["name", "company_name"],
                        "title",
                        (
                            [
                                "Northwind",
                                "Bluebird",
                                "Ironclad",
                                "Silverline",
                                "Greenleaf",
                                "Redwood",
                                "Sunpeak",
                                "Harbor",
                                "Maple",
                                "Cobalt",
                            ],
                            [
                                "Logistics",
                                "Dental",
                                "Bakery",
                                "Studios",
                                "Labs",
                                "Partners",
                                "Foods",
                            ],
                        ),
                    ),
                    f(
                        "attr",
                        ["plan", "support_plan"],
                        "enum",
                        ["basic", "business", "enterprise"],
                    ),
                    f("seats", ["seats", "licensed_seats"], "int", (5, 400), opt=0.7),
                    f("country", ["country"], "enum", ["US", "DE", "FR", "JP", "BR"], opt=0.6),
                ],
            ),
            v(
                ("requester", "requesters"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("attr", ["department", "dept"], "enum", ["finance", "sales", "ops", "legal"]),
                    f("vip", ["is_vip", "vip"], "bool", 0.2, opt=0.6),
                ],
            ),
        ],
        "group": [
            v(
                ("queue", "queues"),
                [
                    f(
                        "name",
                        ["name", "queue_name"],
                        "pool",
                        [
                            "Billing",
                            "Onboarding",
                            "Hardware",
                            "Network",
                            "Access Requests",
                            "Bugs",
                            "Feature Requests",
                            "Security",
                            "Mobile App",
                            "Integrations",
                        ],
                    ),
                    f("attr", ["sla_hours", "target_hours"], "int", (2, 72)),
                ],
            ),
            v(
                ("category", "categories"),
                [
                    f(
                        "name",
                        ["name", "label"],
                        "pool",
                        [
                            "Password Reset",
                            "Laptop",
                            "VPN",
                            "Printer",
                            "Email",
                            "Payroll System",
                            "Phone",
                            "Software License",
                            "Monitor",
                            "Badge Access",
                        ],
                    ),
                    f("attr", ["default_priority", "base_priority"], "enum", _PRIORITY),
                ],
            ),
        ],
        "item": [
            v(
                ("ticket", "tickets"),
                [
                    f(
                        "name",
                        ["subject", "title"],
                        "title",
                        (
                            [
                                "Cannot",
                                "Unable to",
                                "Error when trying to",
                                "Slow response when we",
                                "Timeout while we",
                                "Request to",
                                "Question: how to",
                                "Failure to",
                            ],
                            [
                                "log in",
                                "export invoices",
                                "reset 2FA",
                                "sync contacts",
                                "upload files",
                                "print labels",
                                "connect VPN",
                                "change plan",
                                "add a user",
                                "open reports",
                            ],
                        ),
                    ),
                    f("level", ["priority", "urgency"], "enum", _PRIORITY),
                    f("channel", ["channel", "source"], "enum", ["email", "phone", "chat", "web"]),
                    f("due", ["due_date", "due_on"], "date", (-5, 20), opt=0.7, null=0.3),
                ],
                links={
                    "person": ["assignee_id", "agent_id"],
                    "party": ["customer_id", "requester_id"],
                    "group": ["queue_id", "category_id"],
                },
                state=machine(
                    ["status", "state"],
                    ["new", "open", "pending", "resolved", "closed"],
                    [
                        ("start_work_on", ["new"], "open", None),
                        ("put_on_hold", ["open"], "pending", None),
                        ("resume", ["pending"], "open", None),
                        (
                            "resolve",
                            ["new", "open", "pending"],
                            "resolved",
                            ["resolved_at", "solved_at"],
                        ),
                        ("close", ["resolved"], "closed", ["closed_at"]),
                    ],
                    open_state="open",
                    close="resolve",
                    weights=[2, 4, 2, 2, 1],
                ),
            ),
        ],
        "child": [
            v(
                ("comment", "comments"),
                [
                    f(
                        "body",
                        ["body", "text"],
                        "text",
                        [
                            "Asked the customer for a screenshot.",
                            "Reproduced on staging.",
                            "Escalated to engineering.",
                            "Waiting for the customer's reply.",
                            "Workaround sent by email.",
                            "Customer confirmed the fix works.",
                        ],
                    ),
                    f("public", ["is_public", "visible_to_customer"], "bool", 0.5, opt=0.7),
                ],
                links={"item": ["ticket_id"], "person": ["author_id"]},
            ),
        ],
    },
    [
        v(
            ("macro", "macros"),
            [
                f(
                    "name",
                    ["name", "title"],
                    "pool",
                    [
                        "Password reset steps",
                        "Refund policy",
                        "Escalation notice",
                        "Close inactive",
                        "Request logs",
                        "Known outage",
                        "Welcome reply",
                    ],
                ),
                f("uses", ["usage_count", "times_used"], "int", (0, 500)),
            ],
        ),
        v(
            ("sla_policy", "sla_policies"),
            [
                f(
                    "name",
                    ["name"],
                    "pool",
                    ["Standard", "Premium", "Critical", "Internal", "Partner"],
                ),
                f(
                    "first_response",
                    ["first_response_minutes", "response_minutes"],
                    "int",
                    (15, 480),
                ),
                f("enabled", ["is_enabled", "enabled"], "bool", 0.8),
            ],
        ),
        v(
            ("tag", "tags"),
            [
                f(
                    "name",
                    ["name", "label"],
                    "pool",
                    ["refund", "bug", "outage", "billing", "feedback", "urgent-customer", "mobile"],
                ),
                f("color", ["color"], "enum", ["red", "blue", "green", "gray"]),
            ],
            links={"group": ["queue_id", "category_id"]},
        ),
    ],
)

INVENTORY = family(
    "inventory",
    [
        ("StockPilot", "a warehouse inventory system"),
        ("ShelfSense", "inventory and purchasing for a chain of hardware stores"),
        ("BinTrack", "a parts inventory for a repair workshop"),
    ],
    ["stockpilot.app", "shelfsense.net", "bintrack.example.com"],
    {
        "person": [
            v(
                ("clerk", "clerks"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("email", ["email"], "email"),
                    f("active", ["is_active", "active"], "bool", 0.85),
                    f("role", ["role"], "enum", ["picker", "receiver", "supervisor"]),
                ],
            ),
            v(
                ("buyer", "buyers"),
                [
                    f("name", ["name"], "person"),
                    f("email", ["email", "contact_email"], "email"),
                    f("active", ["is_active", "enabled"], "bool", 0.85),
                    f("limit", ["approval_limit", "spend_limit"], "money", (1000, 50000), opt=0.6),
                ],
            ),
        ],
        "party": [
            v(
                ("supplier", "suppliers"),
                [
                    f(
                        "name",
                        ["name", "supplier_name"],
                        "title",
                        (
                            [
                                "Acme",
                                "Delta",
                                "Summit",
                                "Pioneer",
                                "Keystone",
                                "Atlas",
                                "Vertex",
                                "Orion",
                            ],
                            [
                                "Supply",
                                "Industrial",
                                "Components",
                                "Hardware",
                                "Metals",
                                "Wholesale",
                            ],
                        ),
                    ),
                    f("attr", ["lead_time_days", "lead_days"], "int", (2, 45)),
                    f("rating", ["rating", "score"], "enum", ["A", "B", "C"], opt=0.7),
                ],
            ),
            v(
                ("vendor", "vendors"),
                [
                    f(
                        "name",
                        ["name", "vendor_name"],
                        "title",
                        (
                            ["Apex", "Beacon", "Crest", "Dynamo", "Evergreen", "Falcon", "Granite"],
                            ["Trading", "Parts", "Tools", "Distribution", "Fasteners", "Electric"],
                        ),
                    ),
                    f("attr", ["payment_terms", "terms"], "enum", ["net15", "net30", "net60"]),
                    f("country", ["country"], "enum", ["US", "MX", "CN", "DE"], opt=0.6),
                ],
            ),
        ],
        "group": [
            v(
                ("warehouse", "warehouses"),
                [
                    f(
                        "name",
                        ["name", "site_name"],
                        "pool",
                        [
                            "North Depot",
                            "South Depot",
                            "East Hub",
                            "West Hub",
                            "Central DC",
                            "Harbor Yard",
                            "Airport Annex",
                            "Lakeside Store",
                            "Hilltop Store",
                        ],
                    ),
                    f("attr", ["capacity_pallets", "capacity"], "int", (200, 5000)),
                ],
            ),
            v(
                ("location", "locations"),
                [
                    f(
                        "name",
                        ["name", "label"],
                        "pool",
                        [
                            "Aisle 1",
                            "Aisle 2",
                            "Aisle 3",
                            "Aisle 4",
                            "Cold Room",
                            "Mezzanine",
                            "Cage A",
                            "Cage B",
                            "Overflow",
                        ],
                    ),
                    f("attr", ["zone", "area"], "enum", ["dry", "cold", "secure", "bulk"]),
                ],
            ),
        ],
        "item": [
            v(
                ("purchase_order", "purchase_orders"),
                [
                    f("name", ["reference", "po_number"], "code", "PO"),
                    f("level", ["priority", "urgency"], "enum", ["low", "normal", "high", "rush"]),
                    f("total", ["total_amount", "amount"], "money", (120, 25000)),
                    f("expected", ["expected_date", "eta"], "date", (-3, 30), null=0.2),
                ],
                links={
                    "person": ["buyer_id", "owner_id"],
                    "party": ["supplier_id", "vendor_id"],
                    "group": ["warehouse_id", "location_id"],
                },
                state=machine(
                    ["status", "state"],
                    ["draft", "submitted", "approved", "received", "cancelled"],
                    [
                        ("submit", ["draft"], "submitted", ["submitted_at"]),
                        ("approve", ["submitted"], "approved", ["approved_at"]),
                        ("receive", ["approved"], "received", ["received_at"]),
                        ("cancel", ["draft", "submitted", "approved"], "cancelled", None),
                    ],
                    open_state="submitted",
                    close="cancel",
                    weights=[2, 4, 3, 2, 1],
                ),
            ),
            v(
                ("stock_count", "stock_counts"),
                [
                    f("name", ["reference", "count_code"], "code", "SC"),
                    f("level", ["scope", "kind"], "enum", ["spot", "cycle", "full", "audit"]),
                    f("variance", ["variance_units", "variance"], "int", (-40, 40), opt=0.7),
                ],
                links={
                    "person": ["counter_id", "clerk_id"],
                    "party": ["supplier_id", "vendor_id"],
                    "group": ["warehouse_id", "location_id"],
                },
                state=machine(
                    ["status"],
                    ["planned", "counting", "review", "posted"],
                    [
                        ("begin", ["planned"], "counting", ["started_at"]),
                        ("send_to_review", ["counting"], "review", None),
                        ("post", ["review"], "posted", ["posted_at"]),
                        ("reopen", ["review"], "counting", None),
                    ],
                    open_state="counting",
                    close="send_to_review",
                    weights=[2, 4, 2, 2],
                ),
            ),
        ],
        "child": [
            v(
                ("order_line", "order_lines"),
                [
                    f(
                        "body",
                        ["description", "item_description"],
                        "text",
                        [
                            "M8 hex bolts, box of 100",
                            "Safety gloves, size L",
                            "Pallet wrap 500 mm",
                            "LED work light",
                            "Cable ties 300 mm",
                            "Label printer rolls",
                        ],
                    ),
                    f("quantity", ["quantity", "qty"], "int", (1, 200)),
                    f("unit_price", ["unit_price", "price"], "money", (0.5, 90)),
                ],
                links={"item": ["purchase_order_id"]},
            ),
            v(
                ("count_entry", "count_entries"),
                [
                    f(
                        "body",
                        ["remark", "note"],
                        "text",
                        [
                            "Shelf B2 recounted.",
                            "Two damaged boxes set aside.",
                            "Label missing on one bin.",
                            "Matches the system quantity.",
                            "Found stock in the overflow area.",
                            "Pallet moved before counting.",
                        ],
                    ),
                    f("counted", ["counted_units", "units_counted"], "int", (0, 500)),
                ],
                links={"item": ["stock_count_id"], "person": ["entered_by"]},
            ),
        ],
    },
    [
        v(
            ("product", "products"),
            [
                f(
                    "name",
                    ["name", "product_name"],
                    "title",
                    (
                        ["Steel", "Brass", "Nylon", "Copper", "Rubber", "Oak"],
                        ["Hinge", "Bracket", "Washer", "Pipe", "Valve", "Gasket"],
                    ),
                ),
                f("sku", ["sku"], "code", "SKU"),
                f("reorder", ["reorder_point", "min_stock"], "int", (5, 200)),
            ],
            links={"group": ["warehouse_id", "location_id"]},
        ),
        v(
            ("carrier", "carriers"),
            [
                f(
                    "name",
                    ["name"],
                    "pool",
                    ["FastFreight", "RoadRunner", "BlueLine", "CargoJet", "Parcelo"],
                ),
                f("mode", ["mode"], "enum", ["truck", "air", "rail"]),
            ],
        ),
        v(
            ("unit", "units"),
            [
                f(
                    "name",
                    ["name", "unit_name"],
                    "pool",
                    ["each", "box", "pallet", "meter", "kilogram", "pack"],
                ),
                f("factor", ["conversion_factor", "factor"], "int", (1, 1000)),
            ],
        ),
    ],
)

FAMILIES = [TICKETING, INVENTORY]
