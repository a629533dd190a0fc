"""Deterministic seed data of the e_commerce_admin_1 world (Hearth & Table back office).

All values are literals or computed from literals (order totals, default stock
levels), so every build gives the same INSERT statements. "Now" is 2025-06-12 UTC.
"""

# fmt: off
CATEGORIES = [
    (1, "Kitchen", None),
    (2, "Cookware", 1),
    (3, "Coffee & Tea", 1),
    (4, "Tableware", 1),
    (5, "Home Textiles", None),
    (6, "Bedding", 5),
    (7, "Bath", 5),
    (8, "Storage", None),
]

SUPPLIERS = [
    (1, "Forge & Field Co.", "orders@forgeandfield.example", "US", 14, 1),
    (2, "Kettle & Kiln", "trade@kettleandkiln.example", "GB", 21, 1),
    (3, "Nordic Textiles AB", "sales@nordictextiles.example", "SE", 30, 1),
    (4, "Pacific Ceramics", "export@pacificceramics.example", "JP", 35, 1),
    (5, "Oak & Loom", "hello@oakandloom.example", "US", 10, 1),
    (6, "Brightside Home", "b2b@brightsidehome.example", "CN", 45, 1),
]

# id, sku, name, description, category_id, supplier_id, price, cost, status, created_at
PRODUCTS = [
    (1, "CW-SKL-010", "Cast Iron Skillet 10in", "Pre-seasoned cast iron skillet, 10 inch.", 2, 1, 49.0, 18.5, "active", "2024-08-01 10:00:00"),
    (2, "CW-SKL-012", "Cast Iron Skillet 12in", "Pre-seasoned cast iron skillet, 12 inch.", 2, 1, 64.0, 24.0, "active", "2024-08-01 10:05:00"),
    (3, "CW-DOV-055", "Enameled Dutch Oven 5.5qt", "Enameled cast iron Dutch oven in slate blue.", 2, 1, 129.0, 52.0, "active", "2024-08-03 09:00:00"),
    (4, "CW-SAU-003", "Stainless Saucepan 3qt", "Tri-ply stainless steel saucepan with lid.", 2, 1, 89.5, 33.0, "active", "2024-09-10 09:00:00"),
    (5, "CW-GRL-011", "Carbon Steel Grill Pan", "Ridged carbon steel grill pan (launching in July).", 2, 1, 24.99, 9.75, "draft", "2025-05-20 14:00:00"),
    (6, "CW-WOK-014", "Hand-Hammered Wok 14in", "Carbon steel wok with a wooden handle.", 2, 2, 58.0, 21.0, "active", "2024-10-02 11:00:00"),
    (7, "CT-GRN-018", "Burr Coffee Grinder", "Conical burr grinder with 18 grind settings.", 3, 2, 119.0, 55.0, "active", "2024-08-15 12:00:00"),
    (8, "CT-KTL-010", "Gooseneck Kettle 1L", "Stovetop gooseneck kettle with thermometer.", 3, 2, 79.0, 31.0, "active", "2024-08-15 12:10:00"),
    (9, "CT-POV-002", "Ceramic Pour-Over Set", "Ceramic dripper with a matching carafe.", 3, 4, 42.0, 14.0, "active", "2024-09-01 08:00:00"),
    (10, "CT-TEA-006", "Cast Iron Teapot", "Japanese-style cast iron teapot, 0.6 L.", 3, 1, 54.0, 20.0, "active", "2024-09-20 10:00:00"),
    (11, "CT-FRP-008", "French Press 8-cup", "Borosilicate French press, 1 L.", 3, 2, 39.0, 13.5, "active", "2024-08-20 10:00:00"),
    (12, "TW-DIN-016", "Stoneware Dinner Set (16 pc)", "Reactive-glaze stoneware for four.", 4, 4, 149.0, 61.0, "active", "2024-10-10 10:00:00"),
    (13, "TW-MUG-004", "Speckled Mug Set of 4", "Speckled stoneware mugs, 350 ml.", 4, 4, 36.0, 12.0, "active", "2024-10-10 10:05:00"),
    (14, "TW-BWL-006", "Serving Bowl Large", "Hand-thrown serving bowl.", 4, 4, 45.0, 16.0, "discontinued", "2024-03-01 10:00:00"),
    (15, "HT-APR-SAG", "Linen Apron - Sage", "Stonewashed linen apron in sage green.", 5, 3, 32.0, 11.0, "active", "2024-11-01 09:00:00"),
    (16, "HT-APR-CHR", "Linen Apron - Charcoal", "Stonewashed linen apron in charcoal.", 5, 3, 32.0, 11.0, "active", "2024-11-01 09:05:00"),
    (17, "HT-TWL-SET", "Waffle Tea Towels (set of 3)", "Cotton waffle-weave tea towels.", 5, 3, 24.0, 8.0, "active", "2024-11-01 09:10:00"),
    (18, "BD-DUV-QN", "Linen Duvet Cover Queen", "Stonewashed linen duvet cover, queen.", 6, 3, 219.0, 88.0, "active", "2024-11-15 09:00:00"),
    (19, "BD-SHT-QN", "Percale Sheet Set Queen", "Crisp cotton percale sheet set, queen.", 6, 5, 139.0, 52.0, "active", "2024-11-15 09:30:00"),
    (20, "BD-PIL-STD", "Down Alternative Pillow", "Hypoallergenic pillow, standard size.", 6, 5, 45.0, 15.0, "active", "2024-11-15 09:40:00"),
    (21, "BT-TWL-BTH", "Turkish Bath Towel", "Long-staple Turkish cotton bath towel.", 7, 5, 38.0, 13.0, "active", "2024-12-01 09:00:00"),
    (22, "BT-RBE-M", "Waffle Robe M", "Lightweight waffle robe, size M.", 7, 3, 89.0, 34.0, "draft", "2025-06-01 09:00:00"),
    (23, "ST-BSK-L", "Seagrass Basket Large", "Woven seagrass storage basket.", 8, 6, 48.0, 17.0, "active", "2024-09-05 09:00:00"),
    (24, "ST-JAR-SET", "Glass Pantry Jars (set of 6)", "Glass jars with bamboo lids.", 8, 6, 56.0, 19.0, "active", "2024-09-05 09:10:00"),
    (25, "ST-BIN-CLR", "Clear Fridge Bins (4 pack)", "Stackable BPA-free fridge bins.", 8, 6, 29.0, 9.0, "active", "2024-09-05 09:20:00"),
    (26, "CT-MIL-HND", "Hand Milk Frother", "Battery-powered milk frother.", 3, 2, 19.0, 6.5, "active", "2024-12-10 10:00:00"),
    (27, "HT-NAP-SET", "Linen Napkins (set of 4)", "Stonewashed linen napkins.", 5, 3, 28.0, 9.5, "active", "2025-01-10 10:00:00"),
    (28, "CW-CSR-002", "Ceramic Casserole 2qt", "Oven-safe ceramic casserole with lid.", 2, 4, 68.0, 25.0, "active", "2025-02-01 10:00:00"),
]

WAREHOUSES = [
    (1, "EWR", "Newark Fulfillment Center", "Newark, NJ"),
    (2, "AUS", "Austin Fulfillment Center", "Austin, TX"),
    (3, "RNO", "Reno Fulfillment Center", "Reno, NV"),
]

# (product_id, warehouse_id) -> (on_hand, reorder_point); everything else gets a healthy default.
STOCK_OVERRIDES = {
    (1, 1): (40, 10), (1, 2): (1, 4),
    (5, 1): (0, 0), (5, 2): (0, 0), (5, 3): (0, 0),
    (6, 1): (3, 8), (6, 2): (10, 5), (6, 3): (12, 5),
    (7, 1): (30, 10), (7, 2): (9, 5), (7, 3): (2, 6),
    (8, 1): (4, 12), (8, 2): (5, 4), (8, 3): (20, 8),
    (11, 1): (15, 10), (11, 2): (14, 6), (11, 3): (5, 5),
    (13, 1): (2, 10),
    (14, 1): (0, 0), (14, 2): (0, 0), (14, 3): (3, 0),
    (15, 1): (24, 10), (15, 2): (0, 6), (15, 3): (41, 10),
    (19, 1): (1, 6),
    (22, 1): (0, 0), (22, 2): (0, 0), (22, 3): (0, 0),
    (23, 3): (3, 8),
    (26, 1): (0, 15), (26, 2): (11, 5), (26, 3): (9, 4),
    (27, 1): (12, 5), (27, 2): (0, 3),
}

CUSTOMERS = [
    (1, "grace.liu@example.com", "Grace Liu", "+1-512-555-0141", "standard", 0, "2024-12-02 18:20:00"),
    (2, "jonas.becker@example.com", "Jonas Becker", "+49-30-5550-1187", "gold", 0, "2024-08-21 09:10:00"),
    (3, "jonas.beck@example.com", "Jonas Beck", "+1-303-555-0190", "standard", 0, "2025-02-14 12:00:00"),
    (4, "maya.lindqvist@example.com", "Maya Lindqvist", "+46-8-5550-2231", "gold", 0, "2024-09-03 15:45:00"),
    (5, "olivia.hart@example.com", "Olivia Hart", "+1-212-555-0177", "vip", 0, "2024-08-05 11:00:00"),
    (6, "samir.haddad@example.com", "Samir Haddad", "+1-713-555-0102", "standard", 0, "2025-01-19 16:30:00"),
    (7, "chloe.dubois@example.com", "Chloé Dubois", "+33-1-5550-4410", "standard", 0, "2025-03-08 10:00:00"),
    (8, "ethan.brooks@example.com", "Ethan Brooks", "+1-415-555-0133", "gold", 0, "2024-10-12 20:05:00"),
    (9, "priya.raman@example.com", "Priya Raman", "+1-646-555-0158", "standard", 0, "2025-02-27 08:40:00"),
    (10, "lucas.moreau@example.com", "Lucas Moreau", "+33-6-5550-9912", "standard", 1, "2025-04-02 13:15:00"),
    (11, "aiko.tanaka@example.com", "Aiko Tanaka", "+81-3-5550-7781", "vip", 0, "2024-08-11 07:30:00"),
    (12, "daniel.reyes@example.com", "Daniel Reyes", "+1-602-555-0119", "standard", 0, "2025-03-30 17:00:00"),
    (13, "hannah.okoye@example.com", "Hannah Okoye", "+1-404-555-0166", "gold", 0, "2024-11-23 14:20:00"),
    (14, "mateo.silva@example.com", "Mateo Silva", "+1-305-555-0124", "standard", 0, "2025-04-18 09:00:00"),
    (15, "zoe.kim@example.com", "Zoe Kim", "+1-206-555-0185", "standard", 0, "2025-05-05 19:45:00"),
    (16, "noah.fischer@example.com", "Noah Fischer", "+1-702-555-0137", "standard", 0, "2025-05-11 10:10:00"),
]

COUPONS = [
    (1, "SPRING15", "percent", 15.0, 0.0, 1000, 214, "2025-05-31 23:59:59", 0, "2025-03-01 09:00:00"),
    (2, "SUMMER20", "percent", 20.0, 100.0, 500, 37, "2025-08-31 23:59:59", 1, "2025-06-01 09:00:00"),
    (3, "VIP25", "fixed", 25.0, 150.0, None, 12, None, 1, "2024-11-01 09:00:00"),
    (4, "NEWSLETTER5", "fixed", 5.0, 30.0, None, 388, "2025-12-31 23:59:59", 1, "2024-08-01 09:00:00"),
    (5, "SORRY-SD1012", "fixed", 10.0, 0.0, 1, 1, "2025-04-30 23:59:59", 0, "2025-03-12 09:00:00"),
    (6, "BUNDLE10", "percent", 10.0, 120.0, 300, 41, "2025-07-15 23:59:59", 1, "2025-05-15 09:00:00"),
    (7, "LINEN30", "percent", 30.0, 0.0, 50, 50, "2025-03-31 23:59:59", 0, "2025-02-01 09:00:00"),
]

# id, number, customer, warehouse, status, items [(product_id, qty)], coupon_id, carrier, tracking, placed_at, shipped_at
ORDERS = [
    (1, "SD-1034", 5, 1, "delivered", [(3, 1), (13, 1)], None, "UPS", "1Z84E2W10300112233", "2025-05-02 10:15:00", "2025-05-03 15:00:00"),
    (2, "SD-1035", 8, 2, "delivered", [(7, 1)], None, "FedEx", "FX7788120011", "2025-05-04 12:40:00", "2025-05-05 16:20:00"),
    (3, "SD-1036", 2, 1, "delivered", [(18, 1), (20, 2)], 1, "UPS", "1Z84E2W10300114455", "2025-05-06 09:05:00", "2025-05-07 14:00:00"),
    (4, "SD-1037", 11, 3, "delivered", [(12, 1)], None, "USPS", "9400111899223344556677", "2025-05-08 18:30:00", "2025-05-09 17:45:00"),
    (5, "SD-1038", 6, 2, "delivered", [(9, 2)], None, "FedEx", "FX7788120345", "2025-05-10 11:00:00", "2025-05-12 10:00:00"),
    (6, "SD-1039", 13, 1, "delivered", [(1, 1), (10, 1)], None, "UPS", "1Z84E2W10300117788", "2025-05-13 08:20:00", "2025-05-14 13:30:00"),
    (7, "SD-1040", 4, 1, "delivered", [(15, 1), (17, 1)], None, "UPS", "1Z84E2W10300119900", "2025-05-15 19:10:00", "2025-05-16 12:00:00"),
    (8, "SD-1041", 12, 3, "refunded", [(23, 1)], None, "USPS", "9400111899223344998877", "2025-05-17 14:25:00", "2025-05-18 09:40:00"),
    (9, "SD-1042", 9, 1, "delivered", [(9, 1), (13, 1), (26, 1)], None, "UPS", "1Z84E2W10300121212", "2025-05-19 16:45:00", "2025-05-20 11:10:00"),
    (10, "SD-1043", 1, 2, "delivered", [(8, 1)], None, "FedEx", "FX7788121001", "2025-05-21 10:30:00", "2025-05-22 15:55:00"),
    (11, "SD-1044", 14, 3, "cancelled", [(21, 2)], None, None, None, "2025-05-22 21:05:00", None),
    (12, "SD-1045", 7, 1, "delivered", [(19, 1), (20, 2)], None, "UPS", "1Z84E2W10300123434", "2025-05-24 09:50:00", "2025-05-26 10:05:00"),
    (13, "SD-1046", 5, 1, "shipped", [(2, 1)], None, "UPS", "1Z84E2W10300125656", "2025-06-02 13:00:00", "2025-06-03 16:40:00"),
    (14, "SD-1047", 15, 2, "delivered", [(11, 1), (26, 2)], 4, "FedEx", "FX7788121567", "2025-05-27 17:35:00", "2025-05-28 12:15:00"),
    (15, "SD-1048", 16, 3, "shipped", [(24, 1), (25, 2)], None, "USPS", "9400111899223345112233", "2025-06-04 08:15:00", "2025-06-05 14:20:00"),
    (16, "SD-1049", 3, 1, "delivered", [(4, 1)], None, "UPS", "1Z84E2W10300127878", "2025-05-29 12:00:00", "2025-05-30 10:30:00"),
    (17, "SD-1050", 2, 1, "shipped", [(7, 1), (8, 1)], None, "UPS", "1Z84E2W10300129090", "2025-06-05 09:25:00", "2025-06-06 15:00:00"),
    (18, "SD-1051", 8, 2, "delivered", [(16, 2)], None, "FedEx", "FX7788122230", "2025-05-31 15:00:00", "2025-06-02 09:30:00"),
    (19, "SD-1052", 4, 1, "shipped", [(18, 1)], None, "UPS", "1Z84E2W10300131313", "2025-06-06 20:40:00", "2025-06-08 11:00:00"),
    (20, "SD-1053", 11, 3, "paid", [(12, 1), (13, 2)], None, None, None, "2025-06-09 07:55:00", None),
    (21, "SD-1054", 13, 2, "paid", [(15, 2)], None, None, None, "2025-06-09 18:20:00", None),
    (22, "SD-1055", 6, 1, "paid", [(1, 1)], None, None, None, "2025-06-10 10:05:00", None),
    (23, "SD-1056", 12, 3, "pending", [(25, 1)], None, None, None, "2025-06-10 12:30:00", None),
    (24, "SD-1057", 9, 2, "paid", [(11, 1)], None, None, None, "2025-06-10 16:45:00", None),
    (25, "SD-1058", 4, 1, "paid", [(3, 1), (27, 2)], None, None, None, "2025-06-11 08:10:00", None),
    (26, "SD-1059", 14, 1, "paid", [(21, 1), (20, 1)], None, None, None, "2025-06-11 11:35:00", None),
    (27, "SD-1060", 15, 3, "pending", [(6, 1)], None, None, None, "2025-06-11 14:50:00", None),
    (28, "SD-1061", 1, 2, "paid", [(1, 3), (8, 1), (27, 1)], None, None, None, "2025-06-11 19:25:00", None),
    (29, "SD-1062", 10, 1, "cancelled", [(2, 1)], None, None, None, "2025-06-11 22:00:00", None),
    (30, "SD-1063", 4, 2, "pending", [(13, 1)], None, None, None, "2025-06-12 07:30:00", None),
    (31, "SD-1064", 5, 1, "paid", [(28, 1), (9, 1)], None, None, None, "2025-06-12 09:15:00", None),
    (32, "SD-1065", 16, 3, "pending", [(24, 2)], None, None, None, "2025-06-12 10:40:00", None),
]

# id, order_id, amount (None = full order total), reason, created_at
REFUNDS = [
    (1, 8, None, "Item arrived broken", "2025-05-21 10:00:00"),
    (2, 12, 20.0, "Late delivery goodwill credit", "2025-05-28 09:30:00"),
]

# id, po_number, supplier, warehouse, status, expected_at, created_at, received_at, lines [(product, qty, unit_cost)]
PURCHASE_ORDERS = [
    (1, "PO-2025-014", 1, 1, "received", "2025-05-20", "2025-05-06 10:00:00", "2025-05-19 14:00:00", [(1, 40, 18.5), (3, 12, 52.0)]),
    (2, "PO-2025-015", 4, 2, "submitted", "2025-07-01", "2025-05-28 11:00:00", None, [(9, 30, 14.0), (12, 10, 61.0)]),
    (3, "PO-2025-016", 6, 3, "draft", None, "2025-06-02 09:30:00", None, [(23, 20, 17.0)]),
    (4, "PO-2025-017", 6, 1, "submitted", "2025-07-20", "2025-06-04 15:00:00", None, [(24, 24, 19.0), (25, 40, 9.0)]),
    (5, "PO-2025-011", 6, 2, "received", "2025-04-20", "2025-03-10 09:00:00", "2025-04-18 11:00:00", [(25, 30, 9.0)]),
    (6, "PO-2025-018", 3, 1, "submitted", "2025-07-10", "2025-06-05 10:00:00", None, [(16, 30, 11.0), (17, 40, 8.0)]),
    (7, "PO-2025-012", 2, 3, "cancelled", "2025-05-25", "2025-04-25 16:00:00", None, [(7, 10, 55.0)]),
    (8, "PO-2025-019", 5, 1, "draft", None, "2025-06-10 13:00:00", None, [(19, 12, 52.0), (21, 24, 13.0)]),
]

STOCK_MOVEMENTS = [
    (1, 25, 2, 30, "po_receipt", "PO-2025-011", "2025-04-18 11:00:00"),
    (2, 1, 1, 40, "po_receipt", "PO-2025-014", "2025-05-19 14:00:00"),
    (3, 3, 1, 12, "po_receipt", "PO-2025-014", "2025-05-19 14:00:00"),
    (4, 13, 1, -3, "damaged", "Dropped pallet", "2025-05-23 08:45:00"),
    (5, 15, 2, -4, "transfer_out", "To RNO", "2025-05-30 10:00:00"),
    (6, 15, 3, 4, "transfer_in", "From AUS", "2025-05-30 10:00:00"),
    (7, 8, 3, 1, "count_correction", "Cycle count", "2025-06-06 07:30:00"),
]
# fmt: on


PRICE = {p[0]: p[6] for p in PRODUCTS}
VIP = {c[0] for c in CUSTOMERS if c[4] == "vip"}
COUPON = {c[0]: c for c in COUPONS}


def _money(x: float) -> float:
    return round(x + 1e-9, 2)


def _order_rows():
    orders, items = [], []
    item_id = 0
    for oid, number, cust, wh, status, lines, coupon, carrier, tracking, placed, shipped in ORDERS:
        subtotal = _money(sum(PRICE[p] * q for p, q in lines))
        discount = 0.0
        if coupon is not None:
            c = COUPON[coupon]
            discount = _money(subtotal * c[3] / 100) if c[2] == "percent" else c[3]
        shipping = 0.0 if cust in VIP or subtotal >= 75 else 6.95
        total = _money(subtotal - discount + shipping)
        orders.append(
            (
                oid,
                number,
                cust,
                wh,
                status,
                subtotal,
                discount,
                shipping,
                total,
                coupon,
                carrier,
                tracking,
                placed,
                shipped,
            )
        )
        for p, q in lines:
            item_id += 1
            items.append((item_id, oid, p, q, PRICE[p]))
    return orders, items


def _inventory_rows():
    rows, n = [], 0
    for p in PRODUCTS:
        for w in WAREHOUSES:
            n += 1
            on_hand, reorder = STOCK_OVERRIDES.get(
                (p[0], w[0]), ((p[0] * 7 + w[0] * 13) % 40 + 10, 8)
            )
            rows.append((n, p[0], w[0], on_hand, reorder))
    return rows


ORDER_ROWS, ORDER_ITEM_ROWS = _order_rows()
TOTALS = {o[0]: o[8] for o in ORDER_ROWS}

TABLES = [
    {
        "table_name": "categories",
        "reasoning": "Two-level category tree of a home and kitchen store.",
        "columns": ["id", "name", "parent_id"],
        "rows": CATEGORIES,
    },
    {
        "table_name": "suppliers",
        "reasoning": "Six suppliers with contact and lead-time data; Brightside Home is the one being phased out.",
        "columns": ["id", "name", "contact_email", "country", "lead_time_days", "is_active"],
        "rows": SUPPLIERS,
    },
    {
        "table_name": "products",
        "reasoning": "28 products across categories and suppliers, incl. draft and discontinued ones, "
        "so that price and supplier tasks need filtering.",
        "columns": [
            "id",
            "sku",
            "name",
            "description",
            "category_id",
            "supplier_id",
            "price",
            "cost",
            "status",
            "created_at",
            "updated_at",
        ],
        "rows": [p + (p[9],) for p in PRODUCTS],
    },
    {
        "table_name": "warehouses",
        "reasoning": "Three fulfillment centers.",
        "columns": ["id", "code", "name", "city"],
        "rows": WAREHOUSES,
    },
    {
        "table_name": "inventory_levels",
        "reasoning": "Stock per product and warehouse. A few Kettle & Kiln items and distractors from "
        "other suppliers are below their reorder point; Austin lacks stock for order SD-1061.",
        "columns": ["id", "product_id", "warehouse_id", "on_hand", "reorder_point"],
        "rows": _inventory_rows(),
    },
    {
        "table_name": "customers",
        "reasoning": "Customers in all tiers, with near-duplicate names (Jonas Becker / Jonas Beck) and one blocked account.",
        "columns": ["id", "email", "full_name", "phone", "tier", "is_blocked", "created_at"],
        "rows": CUSTOMERS,
    },
    {
        "table_name": "coupons",
        "reasoning": "Active, expired and exhausted discount codes.",
        "columns": [
            "id",
            "code",
            "discount_type",
            "value",
            "min_order_total",
            "max_redemptions",
            "times_redeemed",
            "expires_at",
            "is_active",
            "created_at",
        ],
        "rows": COUPONS,
    },
    {
        "table_name": "orders",
        "reasoning": "32 orders from May and June 2025 in every status; totals are computed from the items "
        "(free shipping for VIPs and subtotals of $75 or more, otherwise $6.95).",
        "columns": [
            "id",
            "order_number",
            "customer_id",
            "warehouse_id",
            "status",
            "subtotal",
            "discount_total",
            "shipping_total",
            "total",
            "coupon_id",
            "carrier",
            "tracking_number",
            "placed_at",
            "shipped_at",
        ],
        "rows": ORDER_ROWS,
    },
    {
        "table_name": "order_items",
        "reasoning": "Line items at the product price of the time of purchase.",
        "columns": ["id", "order_id", "product_id", "quantity", "unit_price"],
        "rows": ORDER_ITEM_ROWS,
    },
    {
        "table_name": "refunds",
        "reasoning": "One full refund (order SD-1041, now 'refunded') and one partial goodwill refund.",
        "columns": ["id", "order_id", "amount", "reason", "created_at"],
        "rows": [(r[0], r[1], TOTALS[r[1]] if r[2] is None else r[2], r[3], r[4]) for r in REFUNDS],
    },
    {
        "table_name": "purchase_orders",
        "reasoning": "Replenishment orders to suppliers in every status; Brightside Home has a draft and a submitted one open.",
        "columns": [
            "id",
            "po_number",
            "supplier_id",
            "warehouse_id",
            "status",
            "expected_at",
            "created_at",
            "received_at",
        ],
        "rows": [po[:8] for po in PURCHASE_ORDERS],
    },
    {
        "table_name": "purchase_order_lines",
        "reasoning": "Lines of the purchase orders at the supplier cost.",
        "columns": ["id", "purchase_order_id", "product_id", "quantity", "unit_cost"],
        "rows": [
            (n, po_id, p, q, c)
            for n, (po_id, p, q, c) in enumerate(
                ((po[0],) + line for po in PURCHASE_ORDERS for line in po[8]), start=1
            )
        ],
    },
    {
        "table_name": "stock_movements",
        "reasoning": "Audit log of stock changes (receipts, damage, transfers, counts).",
        "columns": [
            "id",
            "product_id",
            "warehouse_id",
            "delta",
            "reason",
            "reference",
            "created_at",
        ],
        "rows": STOCK_MOVEMENTS,
    },
]
