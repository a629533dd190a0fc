"""Families: e-commerce admin, HR (see :mod:`collect.worlds.gen.spec`)."""

from collect.worlds.gen.spec import family, machine
from collect.worlds.gen.spec import field as f
from collect.worlds.gen.spec import variant as v

ECOMMERCE = family(
    "e_commerce_admin",
    [
        ("ShopDesk", "the back office of an online furniture store"),
        ("CartOps", "an order administration console for a sporting goods shop"),
        ("StoreRoom", "the admin panel of a specialty tea web shop"),
    ],
    ["shopdesk.store", "cartops.com", "storeroom.example.shop"],
    {
        "person": [
            v(
                ("staff_member", "staff_members"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("email", ["email"], "email"),
                    f("active", ["is_active", "active"], "bool", 0.85),
                    f("role", ["role"], "enum", ["support", "fulfilment", "manager"]),
                ],
            ),
            v(
                ("fulfilment_agent", "fulfilment_agents"),
                [
                    f("name", ["name"], "person"),
                    f("email", ["email", "work_email"], "email"),
                    f("active", ["is_active", "on_shift"], "bool", 0.85),
                    f("station", ["packing_station", "station"], "int", (1, 12), opt=0.6),
                ],
            ),
        ],
        "party": [
            v(
                ("customer", "customers"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f(
                        "attr",
                        ["tier", "loyalty_tier"],
                        "enum",
                        ["bronze", "silver", "gold", "platinum"],
                    ),
                    f("orders_count", ["lifetime_orders", "order_count"], "int", (0, 80), opt=0.7),
                    f("marketing", ["accepts_marketing", "newsletter"], "bool", 0.4, opt=0.6),
                ],
            ),
            v(
                ("buyer_account", "buyer_accounts"),
                [
                    f(
                        "name",
                        ["name", "account_name"],
                        "title",
                        (
                            ["Cozy", "Urban", "Rustic", "Coastal", "Alpine", "Modern"],
                            ["Cafe", "Interiors", "Hotel", "Office", "Studio"],
                        ),
                    ),
                    f("attr", ["credit_limit", "credit"], "int", (500, 20000)),
                ],
            ),
        ],
        "group": [
            v(
                ("category", "categories"),
                [
                    f(
                        "name",
                        ["name", "category_name"],
                        "pool",
                        [
                            "Chairs",
                            "Tables",
                            "Lighting",
                            "Rugs",
                            "Storage",
                            "Outdoor",
                            "Decor",
                            "Beds",
                            "Kitchen",
                        ],
                    ),
                    f("attr", ["commission_pct", "margin_pct"], "int", (5, 45)),
                ],
            ),
            v(
                ("sales_channel", "sales_channels"),
                [
                    f(
                        "name",
                        ["name", "channel_name"],
                        "pool",
                        [
                            "Web Store",
                            "Marketplace",
                            "Wholesale",
                            "Pop-up",
                            "Phone Orders",
                            "Social Shop",
                        ],
                    ),
                    f("attr", ["fee_pct", "channel_fee_pct"], "int", (0, 20)),
                ],
            ),
        ],
        "item": [
            v(
                ("order", "orders"),
                [
                    f("name", ["order_number", "reference"], "code", "ORD"),
                    f(
                        "level",
                        ["shipping_method", "shipping"],
                        "enum",
                        ["standard", "express", "overnight", "pickup"],
                    ),
                    f("total", ["total", "grand_total"], "money", (15, 2500)),
                    f("placed_on", ["placed_on", "order_date"], "date", (-30, 0)),
                ],
                links={
                    "person": ["handled_by", "assignee_id"],
                    "party": ["customer_id", "buyer_account_id"],
                    "group": ["category_id", "sales_channel_id"],
                },
                state=machine(
                    ["status", "fulfillment_status"],
                    ["pending", "paid", "packed", "shipped", "delivered", "cancelled"],
                    [
                        ("mark_paid", ["pending"], "paid", ["paid_at"]),
                        ("pack", ["paid"], "packed", None),
                        ("ship", ["packed"], "shipped", ["shipped_at"]),
                        ("mark_delivered", ["shipped"], "delivered", ["delivered_at"]),
                        ("cancel", ["pending", "paid", "packed"], "cancelled", ["cancelled_at"]),
                    ],
                    open_state="paid",
                    close="cancel",
                    weights=[2, 4, 2, 2, 2, 1],
                ),
            ),
        ],
        "child": [
            v(
                ("order_note", "order_notes"),
                [
                    f(
                        "body",
                        ["note", "text"],
                        "text",
                        [
                            "Gift wrap requested.",
                            "Customer called about delivery.",
                            "Address corrected.",
                            "Item out of stock, informed customer.",
                            "Leave at the back door.",
                            "Fragile.",
                        ],
                    ),
                    f("internal", ["is_internal", "internal_only"], "bool", 0.6, opt=0.7),
                ],
                links={"item": ["order_id"], "person": ["author_id"]},
            ),
        ],
    },
    [
        v(
            ("coupon", "coupons"),
            [
                f("name", ["code", "coupon_code"], "code", "SAVE"),
                f("percent", ["percent_off", "discount_pct"], "int", (5, 50)),
                f("active", ["is_active", "enabled"], "bool", 0.7),
            ],
        ),
        v(
            ("product", "products"),
            [
                f(
                    "name",
                    ["name", "title"],
                    "title",
                    (
                        ["Oak", "Walnut", "Linen", "Velvet", "Rattan", "Marble"],
                        ["Armchair", "Side Table", "Floor Lamp", "Bench", "Shelf", "Stool"],
                    ),
                ),
                f("price", ["price", "list_price"], "money", (19, 1900)),
                f("stock", ["stock_qty", "in_stock"], "int", (0, 120)),
            ],
            links={"group": ["category_id", "sales_channel_id"]},
        ),
        v(
            ("return_reason", "return_reasons"),
            [
                f(
                    "name",
                    ["label", "name"],
                    "pool",
                    ["Damaged", "Wrong item", "Too late", "Not as described", "Changed mind"],
                ),
                f("restock", ["restockable", "can_restock"], "bool", 0.5),
            ],
        ),
    ],
)

HR = family(
    "hr",
    [
        ("PeopleBase", "an HR system for a 300-person engineering company"),
        ("HireTrack", "an applicant tracking and HR tool for a retail chain"),
        ("StaffSpace", "an HR portal for a hospital group"),
    ],
    ["peoplebase.io", "hiretrack.com", "staffspace.example.org"],
    {
        "person": [
            v(
                ("recruiter", "recruiters"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f("email", ["email"], "email"),
                    f("active", ["is_active", "active"], "bool", 0.85),
                    f(
                        "focus",
                        ["focus_area", "specialism"],
                        "enum",
                        ["engineering", "sales", "operations"],
                    ),
                ],
            ),
            v(
                ("hr_partner", "hr_partners"),
                [
                    f("name", ["name"], "person"),
                    f("email", ["email", "work_email"], "email"),
                    f("active", ["is_active", "available"], "bool", 0.85),
                    f(
                        "office",
                        ["office"],
                        "enum",
                        ["Berlin", "Austin", "Toronto", "Remote"],
                        opt=0.7,
                    ),
                ],
            ),
        ],
        "party": [
            v(
                ("candidate", "candidates"),
                [
                    f("name", ["name", "full_name"], "person"),
                    f(
                        "attr",
                        ["source", "source_channel"],
                        "enum",
                        ["referral", "job_board", "agency", "career_site"],
                    ),
                    f("years", ["years_experience", "experience_years"], "int", (0, 25), opt=0.7),
                ],
            ),
            v(
                ("employee", "employees"),
                [
                    f("name", ["name", "legal_name"], "person"),
                    f(
                        "attr",
                        ["employment_type", "contract"],
                        "enum",
                        ["full_time", "part_time", "contractor"],
                    ),
                    f("salary", ["salary", "base_salary"], "money", (32000, 180000), opt=0.7),
                    f("start", ["start_date", "hired_on"], "date", (-2000, -10), opt=0.6),
                ],
            ),
        ],
        "group": [
            v(
                ("department", "departments"),
                [
                    f(
                        "name",
                        ["name", "department_name"],
                        "pool",
                        [
                            "Engineering",
                            "Sales",
                            "Finance",
                            "People",
                            "Support",
                            "Marketing",
                            "Legal",
                            "Facilities",
                            "Data",
                        ],
                    ),
                    f("attr", ["headcount_budget", "budgeted_headcount"], "int", (3, 120)),
                ],
            ),
            v(
                ("job_opening", "job_openings"),
                [
                    f(
                        "name",
                        ["title", "job_title"],
                        "pool",
                        [
                            "Backend Engineer",
                            "Store Manager",
                            "Nurse Practitioner",
                            "Data Analyst",
                            "Account Executive",
                            "Payroll Specialist",
                            "UX Designer",
                            "IT Technician",
                        ],
                    ),
                    f("attr", ["openings", "positions"], "int", (1, 8)),
                ],
            ),
        ],
        "item": [
            v(
                ("application", "applications"),
                [
                    f("name", ["reference", "application_code"], "code", "APP"),
                    f(
                        "level",
                        ["stage_priority", "priority"],
                        "enum",
                        ["low", "normal", "high", "critical"],
                    ),
                    f(
                        "expected_salary",
                        ["expected_salary", "salary_ask"],
                        "money",
                        (30000, 200000),
                        opt=0.7,
                    ),
                    f("applied_on", ["applied_on", "received_on"], "date", (-60, 0)),
                ],
                links={
                    "person": ["recruiter_id", "owner_id"],
                    "party": ["candidate_id", "employee_id"],
                    "group": ["department_id", "job_opening_id"],
                },
                state=machine(
                    ["status", "stage"],
                    ["applied", "screening", "interview", "offer", "hired", "rejected"],
                    [
                        ("start_screening", ["applied"], "screening", None),
                        ("schedule_interview", ["screening"], "interview", ["interview_at"]),
                        ("make_offer", ["interview"], "offer", ["offered_at"]),
                        ("hire", ["offer"], "hired", ["hired_at"]),
                        (
                            "reject",
                            ["applied", "screening", "interview", "offer"],
                            "rejected",
                            ["rejected_at"],
                        ),
                    ],
                    open_state="screening",
                    close="reject",
                    weights=[2, 4, 3, 1, 1, 1],
                ),
            ),
            v(
                ("leave_request", "leave_requests"),
                [
                    f("name", ["reference", "request_code"], "code", "LV"),
                    f(
                        "level",
                        ["leave_type", "kind"],
                        "enum",
                        ["vacation", "sick", "parental", "unpaid"],
                    ),
                    f("days", ["days", "working_days"], "int", (1, 30)),
                    f("first_day", ["start_date", "first_day"], "date", (-20, 60)),
                ],
                links={
                    "person": ["approver_id", "hr_partner_id"],
                    "party": ["employee_id"],
                    "group": ["department_id", "job_opening_id"],
                },
                state=machine(
                    ["status"],
                    ["submitted", "approved", "declined", "taken", "withdrawn"],
                    [
                        ("approve", ["submitted"], "approved", ["approved_at"]),
                        ("decline", ["submitted"], "declined", ["declined_at"]),
                        ("record_taken", ["approved"], "taken", None),
                        ("withdraw", ["submitted", "approved"], "withdrawn", None),
                    ],
                    open_state="submitted",
                    close="decline",
                    weights=[5, 3, 1, 2, 1],
                ),
            ),
        ],
        "child": [
            v(
                ("review_note", "review_notes"),
                [
                    f(
                        "body",
                        ["comment", "note"],
                        "text",
                        [
                            "Strong system design answers.",
                            "Asked for a second interview.",
                            "References checked.",
                            "Salary expectations above band.",
                            "Manager approved.",
                            "Documents missing.",
                        ],
                    ),
                    f("score", ["score", "rating"], "int", (1, 5), opt=0.7),
                ],
                links={"item": ["application_id"], "person": ["author_id"]},
            ),
            v(
                ("leave_comment", "leave_comments"),
                [
                    f(
                        "body",
                        ["comment", "message"],
                        "text",
                        [
                            "Cover arranged with the team.",
                            "Doctor's note received.",
                            "Overlaps with the release week.",
                            "Approved by the line manager.",
                            "Half day on the last day.",
                            "Handover document shared.",
                        ],
                    ),
                ],
                links={"item": ["leave_request_id"], "person": ["author_id"]},
            ),
        ],
    },
    [
        v(
            ("benefit", "benefits"),
            [
                f(
                    "name",
                    ["name", "benefit_name"],
                    "pool",
                    ["Dental", "Gym", "Pension", "Commuter", "Childcare", "Learning Budget"],
                ),
                f("monthly_cost", ["monthly_cost", "cost"], "money", (10, 400)),
            ],
        ),
        v(
            ("training_course", "training_courses"),
            [
                f(
                    "name",
                    ["title", "name"],
                    "pool",
                    [
                        "Onboarding 101",
                        "Security Basics",
                        "Leadership",
                        "First Aid",
                        "Data Privacy",
                    ],
                ),
                f("hours", ["hours", "duration_hours"], "int", (1, 40)),
                f("mandatory", ["is_mandatory", "required"], "bool", 0.4),
            ],
            links={"group": ["department_id", "job_opening_id"]},
        ),
        v(
            ("office_location", "office_locations"),
            [
                f(
                    "name",
                    ["name", "site"],
                    "pool",
                    ["Berlin HQ", "Austin Hub", "Toronto", "Lisbon", "Remote"],
                ),
                f("desks", ["desk_count", "desks"], "int", (0, 400)),
            ],
        ),
    ],
)

FAMILIES = [ECOMMERCE, HR]
