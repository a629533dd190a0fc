"""SQLite schema of the e_commerce_admin_1 world (Hearth & Table store back office)."""

TABLES = [
    {
        "name": "categories",
        "ddl": """CREATE TABLE categories (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    parent_id INTEGER,
    FOREIGN KEY (parent_id) REFERENCES categories(id)
);""",
        "indexes": ["CREATE INDEX idx_categories_parent_id ON categories(parent_id);"],
    },
    {
        "name": "suppliers",
        "ddl": """CREATE TABLE suppliers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    contact_email TEXT NOT NULL,
    country TEXT NOT NULL,
    lead_time_days INTEGER NOT NULL CHECK (lead_time_days >= 0),
    is_active INTEGER NOT NULL DEFAULT 1
);""",
        "indexes": [],
    },
    {
        "name": "products",
        "ddl": """CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    description TEXT,
    category_id INTEGER NOT NULL,
    supplier_id INTEGER NOT NULL,
    price REAL NOT NULL CHECK (price >= 0),
    cost REAL NOT NULL CHECK (cost >= 0),
    status TEXT NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'active', 'discontinued')),
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (category_id) REFERENCES categories(id),
    FOREIGN KEY (supplier_id) REFERENCES suppliers(id)
);""",
        "indexes": [
            "CREATE INDEX idx_products_category_id ON products(category_id);",
            "CREATE INDEX idx_products_supplier_id ON products(supplier_id);",
            "CREATE INDEX idx_products_status ON products(status);",
            "CREATE INDEX idx_products_name ON products(name);",
        ],
    },
    {
        "name": "warehouses",
        "ddl": """CREATE TABLE warehouses (
    id INTEGER PRIMARY KEY,
    code TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    city TEXT NOT NULL
);""",
        "indexes": [],
    },
    {
        "name": "inventory_levels",
        "ddl": """CREATE TABLE inventory_levels (
    id INTEGER PRIMARY KEY,
    product_id INTEGER NOT NULL,
    warehouse_id INTEGER NOT NULL,
    on_hand INTEGER NOT NULL DEFAULT 0 CHECK (on_hand >= 0),
    reorder_point INTEGER NOT NULL DEFAULT 0 CHECK (reorder_point >= 0),
    FOREIGN KEY (product_id) REFERENCES products(id),
    FOREIGN KEY (warehouse_id) REFERENCES warehouses(id),
    UNIQUE (product_id, warehouse_id)
);""",
        "indexes": [
            "CREATE INDEX idx_inventory_levels_warehouse_id ON inventory_levels(warehouse_id);"
        ],
    },
    {
        "name": "customers",
        "ddl": """CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    full_name TEXT NOT NULL,
    phone TEXT,
    tier TEXT NOT NULL DEFAULT 'standard' CHECK (tier IN ('standard', 'gold', 'vip')),
    is_blocked INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);""",
        "indexes": ["CREATE INDEX idx_customers_full_name ON customers(full_name);"],
    },
    {
        "name": "coupons",
        "ddl": """CREATE TABLE coupons (
    id INTEGER PRIMARY KEY,
    code TEXT NOT NULL UNIQUE,
    discount_type TEXT NOT NULL CHECK (discount_type IN ('percent', 'fixed')),
    value REAL NOT NULL CHECK (value > 0),
    min_order_total REAL NOT NULL DEFAULT 0,
    max_redemptions INTEGER,
    times_redeemed INTEGER NOT NULL DEFAULT 0,
    expires_at TEXT,
    is_active INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);""",
        "indexes": [],
    },
    {
        "name": "orders",
        "ddl": """CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    order_number TEXT NOT NULL UNIQUE,
    customer_id INTEGER NOT NULL,
    warehouse_id INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'delivered', 'cancelled', 'refunded')),
    subtotal REAL NOT NULL,
    discount_total REAL NOT NULL DEFAULT 0,
    shipping_total REAL NOT NULL DEFAULT 0,
    total REAL NOT NULL,
    coupon_id INTEGER,
    carrier TEXT,
    tracking_number TEXT,
    placed_at TEXT NOT NULL,
    shipped_at TEXT,
    FOREIGN KEY (customer_id) REFERENCES customers(id),
    FOREIGN KEY (warehouse_id) REFERENCES warehouses(id),
    FOREIGN KEY (coupon_id) REFERENCES coupons(id)
);""",
        "indexes": [
            "CREATE INDEX idx_orders_customer_id ON orders(customer_id);",
            "CREATE INDEX idx_orders_status ON orders(status);",
            "CREATE INDEX idx_orders_placed_at ON orders(placed_at);",
        ],
    },
    {
        "name": "order_items",
        "ddl": """CREATE TABLE order_items (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL,
    product_id INTEGER NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    unit_price REAL NOT NULL,
    FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE,
    FOREIGN KEY (product_id) REFERENCES products(id)
);""",
        "indexes": ["CREATE INDEX idx_order_items_order_id ON order_items(order_id);"],
    },
    {
        "name": "refunds",
        "ddl": """CREATE TABLE refunds (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL,
    amount REAL NOT NULL CHECK (amount > 0),
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL,
    FOREIGN KEY (order_id) REFERENCES orders(id)
);""",
        "indexes": ["CREATE INDEX idx_refunds_order_id ON refunds(order_id);"],
    },
    {
        "name": "purchase_orders",
        "ddl": """CREATE TABLE purchase_orders (
    id INTEGER PRIMARY KEY,
    po_number TEXT NOT NULL UNIQUE,
    supplier_id INTEGER NOT NULL,
    warehouse_id INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'submitted', 'received', 'cancelled')),
    expected_at TEXT,
    created_at TEXT NOT NULL,
    received_at TEXT,
    FOREIGN KEY (supplier_id) REFERENCES suppliers(id),
    FOREIGN KEY (warehouse_id) REFERENCES warehouses(id)
);""",
        "indexes": [
            "CREATE INDEX idx_purchase_orders_supplier_status ON purchase_orders(supplier_id, status);"
        ],
    },
    {
        "name": "purchase_order_lines",
        "ddl": """CREATE TABLE purchase_order_lines (
    id INTEGER PRIMARY KEY,
    purchase_order_id INTEGER NOT NULL,
    product_id INTEGER NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    unit_cost REAL NOT NULL CHECK (unit_cost >= 0),
    FOREIGN KEY (purchase_order_id) REFERENCES purchase_orders(id) ON DELETE CASCADE,
    FOREIGN KEY (product_id) REFERENCES products(id)
);""",
        "indexes": [
            "CREATE INDEX idx_purchase_order_lines_po ON purchase_order_lines(purchase_order_id);"
        ],
    },
    {
        "name": "stock_movements",
        "ddl": """CREATE TABLE stock_movements (
    id INTEGER PRIMARY KEY,
    product_id INTEGER NOT NULL,
    warehouse_id INTEGER NOT NULL,
    delta INTEGER NOT NULL,
    reason TEXT NOT NULL CHECK (reason IN ('damaged', 'lost', 'found', 'count_correction', 'returned', 'transfer_in', 'transfer_out', 'po_receipt', 'shipment')),
    reference TEXT,
    created_at TEXT NOT NULL,
    FOREIGN KEY (product_id) REFERENCES products(id),
    FOREIGN KEY (warehouse_id) REFERENCES warehouses(id)
);""",
        "indexes": [
            "CREATE INDEX idx_stock_movements_product ON stock_movements(product_id, warehouse_id);"
        ],
    },
]
