"""Tasks, verifiers and reference solutions of the e_commerce_admin_1 world.

Each verifier is a self-contained function; the builder ships its source (renamed to
``verify_task_completion``) in gen_verifier.pure_code.jsonl.
"""

from collect.worlds.src.common import call

SCENARIO = "e_commerce_admin_1"

DESCRIPTION = (
    "Hearth & Table Admin is the back office of an online home and kitchen store (similar to a "
    "Shopify admin). Administrators manage a catalog of products (SKU, category, supplier, price, "
    "cost, draft/active/discontinued status), stock levels with reorder points in three "
    "fulfillment warehouses (manual adjustments, transfers, an audit log of stock movements), and "
    "customer orders that move from pending to paid, shipped and delivered; shipping an order "
    "requires stock in its warehouse and decrements it. Orders can be cancelled (paid ones are "
    "refunded automatically) or refunded partially or fully. Customers have loyalty tiers "
    "(standard, gold, vip) and can be blocked. Discount coupons have percent or fixed values, "
    "minimum order totals, redemption limits and expiry dates. Purchasing covers suppliers with "
    "lead times and purchase orders (draft, submitted, received, cancelled) whose receipt adds "
    "stock; suppliers can only be deactivated once nothing is open with them."
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

    sql = (
        "SELECT discount_type, value, min_order_total, max_redemptions, expires_at, is_active "
        "FROM coupons WHERE UPPER(code) = 'WELCOME10'"
    )
    if q(initial_db_path, sql):
        return {"result": "others"}
    rows = q(final_db_path, sql)
    if len(rows) != 1:
        return {"result": "others"}
    dtype, value, min_total, max_red, expires, active = rows[0]
    if dtype != "percent" or abs((value or 0) - 10) > 1e-6 or abs((min_total or 0) - 50) > 1e-6:
        return {"result": "others"}
    if max_red != 500 or not str(expires or "").startswith("2025-12-31") or active != 1:
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

    sql = "SELECT id, full_name, tier, is_blocked, email, phone FROM customers ORDER BY id"
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    target = [cid for cid, r in before.items() if r[1] == "Jonas Becker"]
    if len(target) != 1 or set(before) != set(after):
        return {"result": "others"}
    for cid, row in before.items():
        expected = row[:2] + ("vip",) + row[3:] if cid == target[0] else row
        if after[cid] != expected:
            return {"result": "others"}
    return {"result": "complete"} if before[target[0]][2] != "vip" else {"result": "others"}


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

    order = q(initial_db_path, "SELECT id, status FROM orders WHERE order_number = 'SD-1042'")
    if len(order) != 1:
        return {"result": "others"}
    oid, status = order[0]
    price = q(
        initial_db_path,
        "SELECT oi.unit_price FROM order_items oi JOIN products p ON p.id = oi.product_id "
        "WHERE oi.order_id = ? AND p.name = 'Ceramic Pour-Over Set'",
        (oid,),
    )
    if len(price) != 1:
        return {"result": "others"}
    old_ids = {r[0] for r in q(initial_db_path, "SELECT id FROM refunds")}
    new = [
        r
        for r in q(final_db_path, "SELECT id, order_id, amount, reason FROM refunds")
        if r[0] not in old_ids
    ]
    if len(new) != 1 or new[0][1] != oid or abs(new[0][2] - price[0][0]) > 0.005:
        return {"result": "others"}
    if "damaged" not in (new[0][3] or "").lower():
        return {"result": "others"}
    after = q(final_db_path, "SELECT status FROM orders WHERE id = ?", (oid,))
    if not after or after[0][0] != status:
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

    pid = q(initial_db_path, "SELECT id FROM products WHERE name = 'Burr Coffee Grinder'")
    wid = q(initial_db_path, "SELECT id FROM warehouses WHERE code = 'EWR'")
    if len(pid) != 1 or len(wid) != 1:
        return {"result": "others"}
    key = (pid[0][0], wid[0][0])
    sql = "SELECT product_id, warehouse_id, on_hand, reorder_point FROM inventory_levels"
    before = {(r[0], r[1]): r[2:] for r in q(initial_db_path, sql)}
    after = {(r[0], r[1]): r[2:] for r in q(final_db_path, sql)}
    if key not in before or set(before) != set(after):
        return {"result": "others"}
    if after[key] != (before[key][0] - 12, 20):
        return {"result": "others"}
    if any(after[k] != v for k, v in before.items() if k != key):
        return {"result": "others"}
    old_ids = {r[0] for r in q(initial_db_path, "SELECT id FROM stock_movements")}
    moves = [
        r[1:]
        for r in q(
            final_db_path, "SELECT id, product_id, warehouse_id, delta, reason FROM stock_movements"
        )
        if r[0] not in old_ids
    ]
    # One or several 'damaged' write-offs of 12 units in total, and no other stock movement.
    if not moves or any((m[0], m[1], m[3]) != (key[0], key[1], "damaged") for m in moves):
        return {"result": "others"}
    if sum(m[2] for m in moves) != -12:
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

    cust = q(initial_db_path, "SELECT id FROM customers WHERE full_name = 'Maya Lindqvist'")
    if len(cust) != 1:
        return {"result": "others"}
    cid = cust[0][0]
    blocked = q(final_db_path, "SELECT is_blocked FROM customers WHERE id = ?", (cid,))
    if not blocked or blocked[0][0] != 1:
        return {"result": "others"}
    sql = "SELECT id, customer_id, status, total FROM orders ORDER BY id"
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    if set(before) != set(after):
        return {"result": "others"}
    refunds = {}
    old_refunds = {r[0] for r in q(initial_db_path, "SELECT id FROM refunds")}
    for rid, oid, amount in q(final_db_path, "SELECT id, order_id, amount FROM refunds"):
        if rid not in old_refunds:
            refunds[oid] = refunds.get(oid, 0.0) + amount
    cancelled = 0
    for oid, (_, owner, status, total) in before.items():
        if owner == cid and status in ("pending", "paid"):
            cancelled += 1
            if after[oid][2] != "cancelled":
                return {"result": "others"}
            expected_refund = total if status == "paid" else 0.0
            if abs(refunds.pop(oid, 0.0) - expected_refund) > 0.005:
                return {"result": "others"}
        elif after[oid][2] != status:
            return {"result": "others"}
    if refunds or cancelled == 0:
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

    prod = q(
        initial_db_path,
        "SELECT id, supplier_id, cost FROM products WHERE name = 'Linen Apron - Sage'",
    )
    aus = q(initial_db_path, "SELECT id FROM warehouses WHERE code = 'AUS'")
    if len(prod) != 1 or len(aus) != 1:
        return {"result": "others"}
    pid, supplier_id, cost = prod[0]
    aus = aus[0][0]
    sql = "SELECT product_id, warehouse_id, on_hand FROM inventory_levels"
    before = {(r[0], r[1]): r[2] for r in q(initial_db_path, sql)}
    after = {(r[0], r[1]): r[2] for r in q(final_db_path, sql)}
    others = sorted(
        ((qty, w) for (p, w), qty in before.items() if p == pid and w != aus), reverse=True
    )
    if (
        not others
        or (len(others) > 1 and others[0][0] == others[1][0])
        or set(before) != set(after)
    ):
        return {"result": "others"}
    source = others[0][1]
    for key, qty in before.items():
        expected = qty + (10 if key == (pid, aus) else -10 if key == (pid, source) else 0)
        if after[key] != expected:
            return {"result": "others"}
    old_pos = {r[0] for r in q(initial_db_path, "SELECT id FROM purchase_orders")}
    new_pos = [
        r
        for r in q(
            final_db_path, "SELECT id, supplier_id, warehouse_id, status FROM purchase_orders"
        )
        if r[0] not in old_pos
    ]
    if len(new_pos) != 1 or new_pos[0][1:] != (supplier_id, aus, "submitted"):
        return {"result": "others"}
    lines = q(
        final_db_path,
        "SELECT product_id, quantity, unit_cost FROM purchase_order_lines WHERE purchase_order_id = ?",
        (new_pos[0][0],),
    )
    if len(lines) != 1 or lines[0][:2] != (pid, 40) or abs(lines[0][2] - cost) > 0.005:
        return {"result": "others"}
    return {"result": "complete"}


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

    sql = (
        "SELECT p.id, p.price, p.status, c.name, s.name FROM products p "
        "JOIN categories c ON c.id = p.category_id JOIN suppliers s ON s.id = p.supplier_id ORDER BY p.id"
    )
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    if not before or set(before) != set(after):
        return {"result": "others"}
    changed = 0
    for pid, (_, price, status, category, supplier) in before.items():
        target = category == "Cookware" and supplier == "Forge & Field Co." and status == "active"
        expected = int(price * 110 + 0.5 + 1e-6) / 100 if target else price
        changed += target
        if abs(after[pid][1] - expected) > 0.005 or after[pid][2] != status:
            return {"result": "others"}
    return {"result": "complete"} if changed else {"result": "others"}


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

    sup = q(initial_db_path, "SELECT id FROM suppliers WHERE name = 'Kettle & Kiln'")
    if len(sup) != 1:
        return {"result": "others"}
    sid = sup[0][0]
    rows = q(
        initial_db_path,
        "SELECT i.warehouse_id, p.id, i.on_hand, i.reorder_point, p.cost FROM inventory_levels i "
        "JOIN products p ON p.id = i.product_id WHERE p.supplier_id = ? AND i.on_hand < i.reorder_point",
        (sid,),
    )
    expected = {}
    for wid, pid, on_hand, reorder, cost in rows:
        expected.setdefault(wid, {})[pid] = (2 * reorder - on_hand, cost)
    if not expected:
        return {"result": "others"}
    old_pos = {r[0] for r in q(initial_db_path, "SELECT id FROM purchase_orders")}
    new_pos = [
        r
        for r in q(
            final_db_path, "SELECT id, supplier_id, warehouse_id, status FROM purchase_orders"
        )
        if r[0] not in old_pos
    ]
    if len(new_pos) != len(expected):
        return {"result": "others"}
    seen = set()
    for po_id, po_sid, wid, status in new_pos:
        if po_sid != sid or status != "submitted" or wid not in expected or wid in seen:
            return {"result": "others"}
        seen.add(wid)
        lines = q(
            final_db_path,
            "SELECT product_id, quantity, unit_cost FROM purchase_order_lines WHERE purchase_order_id = ?",
            (po_id,),
        )
        if sorted(ln[0] for ln in lines) != sorted(expected[wid]):
            return {"result": "others"}
        for pid, qty, unit_cost in lines:
            if qty != expected[wid][pid][0] or abs(unit_cost - expected[wid][pid][1]) > 0.005:
                return {"result": "others"}
    # Existing purchase orders stay as they were.
    po_sql = "SELECT id, status FROM purchase_orders WHERE id = ?"
    for po_id in old_pos:
        if q(final_db_path, po_sql, (po_id,)) != q(initial_db_path, po_sql, (po_id,)):
            return {"result": "others"}
    return {"result": "complete"}


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

    sup = q(initial_db_path, "SELECT id FROM suppliers WHERE name = 'Brightside Home'")
    if len(sup) != 1:
        return {"result": "others"}
    sid = sup[0][0]
    s_before = dict(q(initial_db_path, "SELECT id, is_active FROM suppliers"))
    s_after = dict(q(final_db_path, "SELECT id, is_active FROM suppliers"))
    if s_after.get(sid) != 0 or any(s_after.get(k) != v for k, v in s_before.items() if k != sid):
        return {"result": "others"}
    po_sql = "SELECT id, supplier_id, status FROM purchase_orders"
    po_before = {r[0]: r for r in q(initial_db_path, po_sql)}
    po_after = {r[0]: r for r in q(final_db_path, po_sql)}
    if set(po_before) != set(po_after):
        return {"result": "others"}
    for po_id, (_, po_sid, status) in po_before.items():
        expected = "cancelled" if po_sid == sid and status in ("draft", "submitted") else status
        if po_after[po_id][2] != expected:
            return {"result": "others"}
    p_sql = "SELECT id, supplier_id, status FROM products"
    p_before = {r[0]: r for r in q(initial_db_path, p_sql)}
    p_after = {r[0]: r for r in q(final_db_path, p_sql)}
    if set(p_before) != set(p_after):
        return {"result": "others"}
    for pid, (_, p_sid, status) in p_before.items():
        expected = "discontinued" if p_sid == sid else status
        if p_after[pid][2] != expected:
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

    order = q(
        initial_db_path,
        "SELECT id, customer_id, warehouse_id FROM orders WHERE order_number = 'SD-1061'",
    )
    newark = q(initial_db_path, "SELECT id FROM warehouses WHERE code = 'EWR'")
    if len(order) != 1 or len(newark) != 1:
        return {"result": "others"}
    oid, cid, aus = order[0]
    ewr = newark[0][0]
    items = q(
        initial_db_path,
        "SELECT product_id, SUM(quantity) FROM order_items WHERE order_id = ? GROUP BY product_id",
        (oid,),
    )
    sql = "SELECT product_id, warehouse_id, on_hand FROM inventory_levels"
    before = {(r[0], r[1]): r[2] for r in q(initial_db_path, sql)}
    after = {(r[0], r[1]): r[2] for r in q(final_db_path, sql)}
    if set(before) != set(after) or not items:
        return {"result": "others"}
    expected = dict(before)
    for pid, qty in items:
        missing = max(0, qty - before.get((pid, aus), 0))
        expected[(pid, ewr)] = before[(pid, ewr)] - missing
        expected[(pid, aus)] = before.get((pid, aus), 0) + missing - qty
    if expected != after:
        return {"result": "others"}
    o = q(final_db_path, "SELECT status, carrier, tracking_number FROM orders WHERE id = ?", (oid,))
    if (
        not o
        or o[0][0] != "shipped"
        or (o[0][1] or "").lower() != "fedex"
        or (o[0][2] or "").strip() != "FX7788123400"
    ):
        return {"result": "others"}
    coupon = q(
        final_db_path,
        "SELECT discount_type, value, min_order_total, max_redemptions, expires_at, is_active "
        "FROM coupons WHERE UPPER(code) = 'SORRY-SD1061'",
    )
    if len(coupon) != 1 or q(
        initial_db_path, "SELECT id FROM coupons WHERE UPPER(code) = 'SORRY-SD1061'"
    ):
        return {"result": "others"}
    dtype, value, min_total, max_red, expires, active = coupon[0]
    if dtype != "fixed" or abs(value - 10) > 1e-6 or (min_total or 0) != 0 or max_red != 1:
        return {"result": "others"}
    if not str(expires or "").startswith("2025-09-30") or active != 1:
        return {"result": "others"}
    tier_before = q(initial_db_path, "SELECT tier FROM customers WHERE id = ?", (cid,))
    tier_after = q(final_db_path, "SELECT tier FROM customers WHERE id = ?", (cid,))
    if not tier_before or not tier_after:
        return {"result": "others"}
    expected_tier = "gold" if tier_before[0][0] == "standard" else tier_before[0][0]
    return {"result": "complete"} if tier_after[0][0] == expected_tier else {"result": "others"}


# ---------------------------------------------------------------- tasks

_T9_FIX = [
    call("transfer_stock", product_id=1, from_warehouse_id=1, to_warehouse_id=2, quantity=2),
    call("transfer_stock", product_id=27, from_warehouse_id=1, to_warehouse_id=2, quantity=1),
]
_T9_REST = [
    call("ship_order", order_id=28, carrier="FedEx", tracking_number="FX7788123400"),
    call(
        "create_coupon",
        code="SORRY-SD1061",
        discount_type="fixed",
        value=10,
        max_redemptions=1,
        expires_at="2025-09-30",
    ),
    call("get_customer", customer_id=1),
    call("update_customer", customer_id=1, tier="gold"),
]
_BRIGHTSIDE = [
    call("cancel_purchase_order", purchase_order_id=3),
    call("cancel_purchase_order", purchase_order_id=4),
    call("update_product", product_id=23, status="discontinued"),
    call("update_product", product_id=24, status="discontinued"),
    call("update_product", product_id=25, status="discontinued"),
    call("update_supplier", supplier_id=6, is_active=False),
]
_KK_NEWARK = call(
    "create_purchase_order",
    supplier_id=2,
    warehouse_id=1,
    lines=[
        {"product_id": 6, "quantity": 13, "unit_cost": 21.0},
        {"product_id": 8, "quantity": 20, "unit_cost": 31.0},
        {"product_id": 26, "quantity": 30, "unit_cost": 6.5},
    ],
)

TASKS = [
    {
        "task": "Create a coupon WELCOME10 giving 10% off orders of at least $50, limited to 500 "
        "redemptions in total and expiring on 2025-12-31.",
        "verifier": v0,
        "negatives": [
            [
                call(
                    "create_coupon",
                    code="WELCOME10",
                    discount_type="fixed",
                    value=10,
                    min_order_total=50,
                    max_redemptions=500,
                    expires_at="2025-12-31",
                )
            ]
        ],
        "calls": [
            call(
                "create_coupon",
                code="WELCOME10",
                discount_type="percent",
                value=10,
                min_order_total=50,
                max_redemptions=500,
                expires_at="2025-12-31",
            )
        ],
    },
    {
        "task": "Upgrade the customer Jonas Becker to the VIP tier.",
        "verifier": v1,
        "negatives": [[call("update_customer", customer_id=3, tier="vip")]],
        "calls": [
            call("list_customers", search="Jonas Becker"),
            call("update_customer", customer_id=2, tier="vip"),
        ],
    },
    {
        "task": "The Ceramic Pour-Over Set in order SD-1042 arrived damaged. Refund the price the "
        "customer paid for it, with the reason 'Damaged in transit'.",
        "verifier": v2,
        "negatives": [[call("issue_refund", order_id=9, amount=36.0, reason="Damaged in transit")]],
        "calls": [
            call("list_orders", order_number="SD-1042"),
            call("get_order", order_id=9),
            call("issue_refund", order_id=9, amount=42.0, reason="Damaged in transit"),
        ],
    },
    {
        "task": "12 units of the Burr Coffee Grinder were damaged at the Newark warehouse. Write them off "
        "as damaged and raise the grinder's reorder point in Newark to 20.",
        "verifier": v3,
        "negatives": [
            [
                call("adjust_inventory", product_id=7, warehouse_id=1, delta=-12, reason="lost"),
                call("set_reorder_point", product_id=7, warehouse_id=1, reorder_point=20),
            ]
        ],
        "calls": [
            call("search_products", search="Burr Coffee Grinder"),
            call("list_warehouses"),
            call("adjust_inventory", product_id=7, warehouse_id=1, delta=-12, reason="damaged"),
            call("set_reorder_point", product_id=7, warehouse_id=1, reorder_point=20),
        ],
    },
    {
        "task": "Maya Lindqvist's account shows signs of fraud. Block her account and cancel all of her "
        "orders that have not shipped yet.",
        "verifier": v4,
        "negatives": [
            [
                call("update_customer", customer_id=4, is_blocked=True),
                call("cancel_order", order_id=25, reason="Suspected fraud"),
                call("cancel_order", order_id=30, reason="Suspected fraud"),
                call("cancel_order", order_id=23, reason="Suspected fraud"),
            ]
        ],
        "calls": [
            call("list_customers", search="Maya Lindqvist"),
            call("update_customer", customer_id=4, is_blocked=True),
            call("list_orders", customer_id=4),
            call("cancel_order", order_id=25, reason="Suspected fraud"),
            call("cancel_order", order_id=30, reason="Suspected fraud"),
        ],
    },
    {
        "task": "Austin is out of 'Linen Apron - Sage'. Transfer 10 units to Austin from whichever other "
        "warehouse has the most of it, then order 40 more from the product's supplier for delivery to "
        "Austin at the product's unit cost, and submit that purchase order.",
        "verifier": v5,
        "negatives": [
            [
                call(
                    "transfer_stock",
                    product_id=15,
                    from_warehouse_id=1,
                    to_warehouse_id=2,
                    quantity=10,
                ),
                call(
                    "create_purchase_order",
                    supplier_id=3,
                    warehouse_id=2,
                    lines=[{"product_id": 15, "quantity": 40, "unit_cost": 11.0}],
                ),
                call("submit_purchase_order", purchase_order_id=9),
            ]
        ],
        "calls": [
            call("search_products", search="Linen Apron - Sage"),
            call("get_product", product_id=15),
            call("list_warehouses"),
            call(
                "transfer_stock", product_id=15, from_warehouse_id=3, to_warehouse_id=2, quantity=10
            ),
            call(
                "create_purchase_order",
                supplier_id=3,
                warehouse_id=2,
                lines=[{"product_id": 15, "quantity": 40, "unit_cost": 11.0}],
            ),
            call("submit_purchase_order", purchase_order_id=9),
        ],
    },
    {
        "task": "Raise the price of every active Cookware product supplied by Forge & Field Co. by 10%, "
        "rounded to the nearest cent. Leave all other products unchanged.",
        "verifier": v6,
        "negatives": [
            [
                call("update_product", product_id=p, price=v)
                for p, v in ((1, 53.9), (2, 70.4), (3, 141.9), (4, 98.45), (5, 27.49))
            ]
        ],
        "calls": [
            call("list_categories"),
            call("list_suppliers"),
            call("search_products", category_id=2, supplier_id=1, status="active"),
            call("update_product", product_id=1, price=53.9),
            call("update_product", product_id=2, price=70.4),
            call("update_product", product_id=3, price=141.9),
            call("update_product", product_id=4, price=98.45),
        ],
    },
    {
        "task": "Restock Kettle & Kiln items: for each warehouse where any Kettle & Kiln product is below "
        "its reorder point, create one purchase order to Kettle & Kiln for that warehouse with a line "
        "for each such product (quantity = 2 x reorder point - on hand, unit cost = the product's "
        "cost) and submit it. Do not order products that are not below their reorder point.",
        "verifier": v7,
        "negatives": [
            [
                _KK_NEWARK,
                call("submit_purchase_order", purchase_order_id=9),
                call(
                    "create_purchase_order",
                    supplier_id=2,
                    warehouse_id=3,
                    lines=[
                        {"product_id": 7, "quantity": 10, "unit_cost": 55.0},
                        {"product_id": 11, "quantity": 5, "unit_cost": 13.5},
                    ],
                ),
                call("submit_purchase_order", purchase_order_id=10),
            ]
        ],
        "calls": [
            call("list_warehouses"),
            call("list_inventory", below_reorder_point=True),
            call("list_suppliers", search="Kettle"),
            call("search_products", supplier_id=2),
            _KK_NEWARK,
            call("submit_purchase_order", purchase_order_id=9),
            call(
                "create_purchase_order",
                supplier_id=2,
                warehouse_id=3,
                lines=[{"product_id": 7, "quantity": 10, "unit_cost": 55.0}],
            ),
            call("submit_purchase_order", purchase_order_id=10),
        ],
    },
    {
        "task": "We are ending our relationship with Brightside Home. Cancel all of their open (draft or "
        "submitted) purchase orders, mark all of their products as discontinued, and deactivate the "
        "supplier.",
        "verifier": v8,
        "negatives": [_BRIGHTSIDE + [call("cancel_purchase_order", purchase_order_id=2)]],
        "calls": [
            call("list_suppliers", search="Brightside"),
            call("list_purchase_orders", supplier_id=6),
            _BRIGHTSIDE[0],
            _BRIGHTSIDE[1],
            call("search_products", supplier_id=6),
            *_BRIGHTSIDE[2:],
        ],
    },
    {
        "task": "Order SD-1061 is stuck because its warehouse (Austin) lacks stock. For each item Austin "
        "cannot fully cover, transfer exactly the missing quantity from Newark to Austin, then ship the "
        "order with FedEx, tracking number FX7788123400. Apologize to the customer with a single-use "
        "coupon SORRY-SD1061 worth $10 off (fixed amount, no minimum order) that expires on 2025-09-30, "
        "and upgrade the customer to the gold tier if they are currently standard.",
        "verifier": v9,
        "negatives": [
            [
                call(
                    "transfer_stock",
                    product_id=1,
                    from_warehouse_id=1,
                    to_warehouse_id=2,
                    quantity=3,
                ),
                _T9_FIX[1],
                *_T9_REST,
            ]
        ],
        "calls": [
            call("list_orders", order_number="SD-1061"),
            call("get_order", order_id=28),
            call("list_warehouses"),
            call("list_inventory", warehouse_id=2),
            *_T9_FIX,
            *_T9_REST,
        ],
    },
]
