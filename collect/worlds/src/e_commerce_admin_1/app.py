"""Hearth & Table Admin: the back office of a home and kitchen web store, over SQLite.

AWM-style environment of the helpdp project (scenario e_commerce_admin_1). The caller is a
store administrator. Stock is decremented when an order ships, not when it is paid.
"""

import os
import re
from datetime import datetime, timedelta, timezone
from typing import Literal

from fastapi import FastAPI, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Column, Float, ForeignKey, Integer, String, Text, create_engine, func, or_
from sqlalchemy.orm import declarative_base, sessionmaker

database_url = os.getenv("DATABASE_PATH", "sqlite:///outputs/databases/e_commerce_admin_1.db")

# one line: AWM's server rewrites each line holding the engine call to the episode's database
sqlite_args = {"check_same_thread": False} if database_url.startswith("sqlite") else {}
engine = create_engine(database_url, connect_args=sqlite_args)
SessionLocal = sessionmaker(bind=engine, autoflush=False, autocommit=False)

Base = declarative_base()


class Category(Base):
    __tablename__ = "categories"
    id = Column(Integer, primary_key=True)
    name = Column(String, unique=True, nullable=False)
    parent_id = Column(Integer, ForeignKey("categories.id"))


class Supplier(Base):
    __tablename__ = "suppliers"
    id = Column(Integer, primary_key=True)
    name = Column(String, unique=True, nullable=False)
    contact_email = Column(String, nullable=False)
    country = Column(String, nullable=False)
    lead_time_days = Column(Integer, nullable=False)
    is_active = Column(Integer, nullable=False, default=1)


class Product(Base):
    __tablename__ = "products"
    id = Column(Integer, primary_key=True)
    sku = Column(String, unique=True, nullable=False)
    name = Column(String, nullable=False)
    description = Column(Text)
    category_id = Column(Integer, ForeignKey("categories.id"), nullable=False)
    supplier_id = Column(Integer, ForeignKey("suppliers.id"), nullable=False)
    price = Column(Float, nullable=False)
    cost = Column(Float, nullable=False)
    status = Column(String, nullable=False, default="draft")
    created_at = Column(String)
    updated_at = Column(String)


class Warehouse(Base):
    __tablename__ = "warehouses"
    id = Column(Integer, primary_key=True)
    code = Column(String, unique=True, nullable=False)
    name = Column(String, nullable=False)
    city = Column(String, nullable=False)


class InventoryLevel(Base):
    __tablename__ = "inventory_levels"
    id = Column(Integer, primary_key=True)
    product_id = Column(Integer, ForeignKey("products.id"), nullable=False)
    warehouse_id = Column(Integer, ForeignKey("warehouses.id"), nullable=False)
    on_hand = Column(Integer, nullable=False, default=0)
    reorder_point = Column(Integer, nullable=False, default=0)


class Customer(Base):
    __tablename__ = "customers"
    id = Column(Integer, primary_key=True)
    email = Column(String, unique=True, nullable=False)
    full_name = Column(String, nullable=False)
    phone = Column(String)
    tier = Column(String, nullable=False, default="standard")
    is_blocked = Column(Integer, nullable=False, default=0)
    created_at = Column(String)


class Coupon(Base):
    __tablename__ = "coupons"
    id = Column(Integer, primary_key=True)
    code = Column(String, unique=True, nullable=False)
    discount_type = Column(String, nullable=False)
    value = Column(Float, nullable=False)
    min_order_total = Column(Float, nullable=False, default=0)
    max_redemptions = Column(Integer)
    times_redeemed = Column(Integer, nullable=False, default=0)
    expires_at = Column(String)
    is_active = Column(Integer, nullable=False, default=1)
    created_at = Column(String)


class Order(Base):
    __tablename__ = "orders"
    id = Column(Integer, primary_key=True)
    order_number = Column(String, unique=True, nullable=False)
    customer_id = Column(Integer, ForeignKey("customers.id"), nullable=False)
    warehouse_id = Column(Integer, ForeignKey("warehouses.id"), nullable=False)
    status = Column(String, nullable=False)
    subtotal = Column(Float, nullable=False)
    discount_total = Column(Float, nullable=False, default=0)
    shipping_total = Column(Float, nullable=False, default=0)
    total = Column(Float, nullable=False)
    coupon_id = Column(Integer, ForeignKey("coupons.id"))
    carrier = Column(String)
    tracking_number = Column(String)
    placed_at = Column(String, nullable=False)
    shipped_at = Column(String)


class OrderItem(Base):
    __tablename__ = "order_items"
    id = Column(Integer, primary_key=True)
    order_id = Column(Integer, ForeignKey("orders.id"), nullable=False)
    product_id = Column(Integer, ForeignKey("products.id"), nullable=False)
    quantity = Column(Integer, nullable=False)
    unit_price = Column(Float, nullable=False)


class Refund(Base):
    __tablename__ = "refunds"
    id = Column(Integer, primary_key=True)
    order_id = Column(Integer, ForeignKey("orders.id"), nullable=False)
    amount = Column(Float, nullable=False)
    reason = Column(Text, nullable=False)
    created_at = Column(String, nullable=False)


class PurchaseOrder(Base):
    __tablename__ = "purchase_orders"
    id = Column(Integer, primary_key=True)
    po_number = Column(String, unique=True, nullable=False)
    supplier_id = Column(Integer, ForeignKey("suppliers.id"), nullable=False)
    warehouse_id = Column(Integer, ForeignKey("warehouses.id"), nullable=False)
    status = Column(String, nullable=False, default="draft")
    expected_at = Column(String)
    created_at = Column(String, nullable=False)
    received_at = Column(String)


class PurchaseOrderLine(Base):
    __tablename__ = "purchase_order_lines"
    id = Column(Integer, primary_key=True)
    purchase_order_id = Column(Integer, ForeignKey("purchase_orders.id"), nullable=False)
    product_id = Column(Integer, ForeignKey("products.id"), nullable=False)
    quantity = Column(Integer, nullable=False)
    unit_cost = Column(Float, nullable=False)


class StockMovement(Base):
    __tablename__ = "stock_movements"
    id = Column(Integer, primary_key=True)
    product_id = Column(Integer, ForeignKey("products.id"), nullable=False)
    warehouse_id = Column(Integer, ForeignKey("warehouses.id"), nullable=False)
    delta = Column(Integer, nullable=False)
    reason = Column(String, nullable=False)
    reference = Column(String)
    created_at = Column(String, nullable=False)


Base.metadata.create_all(engine)

app = FastAPI(
    title="Hearth & Table Admin API",
    version="1.0.0",
    description="Store back office: catalog, inventory, orders, refunds, customers, coupons and purchasing.",
)


def now_str() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def money(x: float) -> float:
    return round(x + 1e-9, 2)


def get_or_404(session, model, obj_id: int, label: str):
    obj = session.get(model, obj_id)
    if obj is None:
        raise HTTPException(status_code=404, detail=f"{label} {obj_id} not found")
    return obj


def level(
    session, product_id: int, warehouse_id: int, create: bool = False
) -> InventoryLevel | None:
    row = (
        session.query(InventoryLevel)
        .filter(
            InventoryLevel.product_id == product_id, InventoryLevel.warehouse_id == warehouse_id
        )
        .first()
    )
    if row is None and create:
        row = InventoryLevel(
            product_id=product_id, warehouse_id=warehouse_id, on_hand=0, reorder_point=0
        )
        session.add(row)
        session.flush()
    return row


def move(
    session, product_id: int, warehouse_id: int, delta: int, reason: str, reference: str | None
):
    session.add(
        StockMovement(
            product_id=product_id,
            warehouse_id=warehouse_id,
            delta=delta,
            reason=reason,
            reference=reference,
            created_at=now_str(),
        )
    )


# ---------------------------------------------------------------- schemas


class CategoryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    name: str
    parent_id: int | None = None


class SupplierOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    name: str
    contact_email: str
    country: str
    lead_time_days: int
    is_active: bool


class ProductOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    sku: str
    name: str
    description: str | None = None
    category_id: int
    supplier_id: int
    price: float
    cost: float
    status: str
    updated_at: str | None = None


class StockOut(BaseModel):
    product_id: int
    sku: str
    product_name: str
    supplier_id: int
    warehouse_id: int
    warehouse_code: str
    on_hand: int
    reorder_point: int
    below_reorder_point: bool


class ProductDetail(ProductOut):
    category_name: str
    supplier_name: str
    inventory: list[StockOut]


class WarehouseOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    code: str
    name: str
    city: str


class ProductCreate(BaseModel):
    sku: str = Field(..., pattern=r"^[A-Z0-9\-]{3,32}$", description="Unique stock keeping unit.")
    name: str = Field(..., min_length=1, max_length=120, description="Product name.")
    description: str | None = Field(None, description="Product description.")
    category_id: int = Field(..., description="Category ID.")
    supplier_id: int = Field(..., description="Supplier ID.")
    price: float = Field(..., gt=0, description="Retail price in USD.")
    cost: float = Field(..., ge=0, description="Unit cost from the supplier in USD.")
    status: Literal["draft", "active"] = Field("draft", description="Initial status.")


class ProductUpdate(BaseModel):
    name: str | None = Field(None, min_length=1, max_length=120, description="New name.")
    description: str | None = Field(None, description="New description.")
    category_id: int | None = Field(None, description="New category.")
    supplier_id: int | None = Field(None, description="New supplier.")
    price: float | None = Field(
        None, gt=0, description="New retail price in USD (rounded to cents)."
    )
    cost: float | None = Field(None, ge=0, description="New unit cost in USD.")
    status: Literal["draft", "active", "discontinued"] | None = Field(
        None, description="New status."
    )


class AdjustmentCreate(BaseModel):
    product_id: int = Field(..., description="Product to adjust.")
    warehouse_id: int = Field(..., description="Warehouse holding the stock.")
    delta: int = Field(..., description="Change of on-hand units (negative to remove).")
    reason: Literal["damaged", "lost", "found", "count_correction", "returned"] = Field(
        ..., description="Why the stock changes."
    )
    note: str | None = Field(None, max_length=200, description="Optional reference.")


class TransferCreate(BaseModel):
    product_id: int = Field(..., description="Product to move.")
    from_warehouse_id: int = Field(..., description="Source warehouse.")
    to_warehouse_id: int = Field(..., description="Destination warehouse.")
    quantity: int = Field(..., gt=0, description="Units to move.")


class ReorderPointSet(BaseModel):
    product_id: int = Field(..., description="Product.")
    warehouse_id: int = Field(..., description="Warehouse.")
    reorder_point: int = Field(
        ..., ge=0, description="Restock when on-hand falls below this level."
    )


class OrderOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    order_number: str
    customer_id: int
    warehouse_id: int
    status: str
    subtotal: float
    discount_total: float
    shipping_total: float
    total: float
    coupon_id: int | None = None
    carrier: str | None = None
    tracking_number: str | None = None
    placed_at: str
    shipped_at: str | None = None


class OrderItemOut(BaseModel):
    id: int
    product_id: int
    sku: str
    product_name: str
    quantity: int
    unit_price: float
    line_total: float


class RefundOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    order_id: int
    amount: float
    reason: str
    created_at: str


class OrderDetail(OrderOut):
    customer_name: str
    items: list[OrderItemOut]
    refunds: list[RefundOut]
    refunded_total: float
    refundable_amount: float


class ShipRequest(BaseModel):
    carrier: Literal["UPS", "FedEx", "USPS", "DHL"] = Field(..., description="Shipping carrier.")
    tracking_number: str = Field(
        ..., min_length=6, max_length=40, description="Carrier tracking number."
    )


class CancelRequest(BaseModel):
    reason: str = Field(
        ..., min_length=3, max_length=200, description="Why the order is cancelled."
    )


class RefundCreate(BaseModel):
    amount: float = Field(..., gt=0, description="Amount to refund in USD.")
    reason: str = Field(
        ..., min_length=3, max_length=200, description="Refund reason shown to the customer."
    )


class CustomerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    email: str
    full_name: str
    phone: str | None = None
    tier: str
    is_blocked: bool
    created_at: str | None = None


class CustomerDetail(CustomerOut):
    order_count: int
    total_spent: float


class CustomerUpdate(BaseModel):
    full_name: str | None = Field(None, min_length=1, max_length=120, description="New name.")
    phone: str | None = Field(None, max_length=30, description="New phone number.")
    tier: Literal["standard", "gold", "vip"] | None = Field(None, description="Loyalty tier.")
    is_blocked: bool | None = Field(None, description="Block or unblock the account.")


class CouponOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    code: str
    discount_type: str
    value: float
    min_order_total: float
    max_redemptions: int | None = None
    times_redeemed: int
    expires_at: str | None = None
    is_active: bool


class CouponCreate(BaseModel):
    code: str = Field(
        ..., pattern=r"^[A-Z0-9\-]{3,32}$", description="Upper-case code customers type in."
    )
    discount_type: Literal["percent", "fixed"] = Field(
        ..., description="Percent off or fixed USD amount off."
    )
    value: float = Field(..., gt=0, description="Percent (1-100) or USD amount.")
    min_order_total: float = Field(0, ge=0, description="Minimum order subtotal in USD.")
    max_redemptions: int | None = Field(
        None, ge=1, description="Total uses allowed; omit for unlimited."
    )
    expires_at: str | None = Field(
        None, description="Expiry date YYYY-MM-DD (end of day UTC); omit for none."
    )


class CouponUpdate(BaseModel):
    value: float | None = Field(None, gt=0, description="New value.")
    min_order_total: float | None = Field(None, ge=0, description="New minimum order subtotal.")
    max_redemptions: int | None = Field(None, ge=1, description="New redemption limit.")
    expires_at: str | None = Field(None, description="New expiry date YYYY-MM-DD.")
    is_active: bool | None = Field(None, description="Enable or disable the code.")


class SupplierUpdate(BaseModel):
    contact_email: str | None = Field(None, description="New contact email.")
    lead_time_days: int | None = Field(None, ge=0, le=365, description="New lead time.")
    is_active: bool | None = Field(
        None, description="Deactivate (false) or reactivate (true) the supplier."
    )


class POLineIn(BaseModel):
    product_id: int = Field(..., description="Product supplied by this supplier.")
    quantity: int = Field(..., gt=0, description="Units to order.")
    unit_cost: float = Field(..., ge=0, description="Cost per unit in USD.")


class POCreate(BaseModel):
    supplier_id: int = Field(..., description="Supplier to order from.")
    warehouse_id: int = Field(..., description="Receiving warehouse.")
    lines: list[POLineIn] = Field(..., min_length=1, description="One line per product.")
    expected_at: str | None = Field(None, description="Expected delivery date YYYY-MM-DD.")


class POLineOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    product_id: int
    quantity: int
    unit_cost: float


class POOut(BaseModel):
    id: int
    po_number: str
    supplier_id: int
    supplier_name: str
    warehouse_id: int
    status: str
    expected_at: str | None = None
    created_at: str
    received_at: str | None = None
    total_cost: float
    lines: list[POLineOut]


DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_date(value: str | None, end_of_day: bool = False) -> str | None:
    if value is None:
        return None
    if not DATE_RE.match(value):
        raise HTTPException(status_code=400, detail=f"Invalid date '{value}', expected YYYY-MM-DD")
    try:
        datetime.strptime(value, "%Y-%m-%d")
    except ValueError as exc:
        raise HTTPException(status_code=400, detail=f"Invalid date '{value}'") from exc
    return f"{value} 23:59:59" if end_of_day else value


def stock_out(session, row: InventoryLevel) -> StockOut:
    p = session.get(Product, row.product_id)
    w = session.get(Warehouse, row.warehouse_id)
    return StockOut(
        product_id=p.id,
        sku=p.sku,
        product_name=p.name,
        supplier_id=p.supplier_id,
        warehouse_id=w.id,
        warehouse_code=w.code,
        on_hand=row.on_hand,
        reorder_point=row.reorder_point,
        below_reorder_point=row.on_hand < row.reorder_point,
    )


def product_detail(session, p: Product) -> ProductDetail:
    rows = session.query(InventoryLevel).filter(InventoryLevel.product_id == p.id)
    return ProductDetail(
        **ProductOut.model_validate(p).model_dump(),
        category_name=session.get(Category, p.category_id).name,
        supplier_name=session.get(Supplier, p.supplier_id).name,
        inventory=[stock_out(session, r) for r in rows.order_by(InventoryLevel.warehouse_id)],
    )


def refunded_total(session, order_id: int) -> float:
    return money(
        session.query(func.coalesce(func.sum(Refund.amount), 0.0))
        .filter(Refund.order_id == order_id)
        .scalar()
    )


def order_detail(session, o: Order) -> OrderDetail:
    items = []
    for it in session.query(OrderItem).filter(OrderItem.order_id == o.id).order_by(OrderItem.id):
        p = session.get(Product, it.product_id)
        items.append(
            OrderItemOut(
                id=it.id,
                product_id=p.id,
                sku=p.sku,
                product_name=p.name,
                quantity=it.quantity,
                unit_price=it.unit_price,
                line_total=money(it.quantity * it.unit_price),
            )
        )
    refunds = session.query(Refund).filter(Refund.order_id == o.id).order_by(Refund.id).all()
    done = refunded_total(session, o.id)
    refundable = money(o.total - done) if o.status in ("paid", "shipped", "delivered") else 0.0
    return OrderDetail(
        **OrderOut.model_validate(o).model_dump(),
        customer_name=session.get(Customer, o.customer_id).full_name,
        items=items,
        refunds=[RefundOut.model_validate(r) for r in refunds],
        refunded_total=done,
        refundable_amount=refundable,
    )


def po_out(session, po: PurchaseOrder) -> POOut:
    lines = (
        session.query(PurchaseOrderLine).filter(PurchaseOrderLine.purchase_order_id == po.id).all()
    )
    return POOut(
        id=po.id,
        po_number=po.po_number,
        supplier_id=po.supplier_id,
        supplier_name=session.get(Supplier, po.supplier_id).name,
        warehouse_id=po.warehouse_id,
        status=po.status,
        expected_at=po.expected_at,
        created_at=po.created_at,
        received_at=po.received_at,
        total_cost=money(sum(ln.quantity * ln.unit_cost for ln in lines)),
        lines=[POLineOut.model_validate(ln) for ln in sorted(lines, key=lambda ln: ln.id)],
    )


# ---------------------------------------------------------------- catalog


@app.get(
    "/api/categories",
    response_model=list[CategoryOut],
    operation_id="list_categories",
    summary="List categories",
    description="List all product categories (parent_id links subcategories to their parent).",
    tags=["catalog"],
)
def list_categories() -> list[CategoryOut]:
    with SessionLocal() as session:
        return [
            CategoryOut.model_validate(c) for c in session.query(Category).order_by(Category.id)
        ]


@app.get(
    "/api/products",
    response_model=list[ProductOut],
    operation_id="search_products",
    summary="Search products",
    description="Search the catalog by text or SKU and filter by category, supplier, status and price range.",
    tags=["catalog"],
)
def search_products(
    search: str | None = Query(
        None, description="Case-insensitive match on name, SKU or description."
    ),
    category_id: int | None = Query(
        None, description="Only this category (not its subcategories)."
    ),
    supplier_id: int | None = Query(None, description="Only products from this supplier."),
    status: Literal["draft", "active", "discontinued"] | None = Query(
        None, description="Filter by status."
    ),
    min_price: float | None = Query(None, ge=0, description="Minimum price."),
    max_price: float | None = Query(None, ge=0, description="Maximum price."),
) -> list[ProductOut]:
    with SessionLocal() as session:
        q = session.query(Product)
        if search:
            like = f"%{search}%"
            q = q.filter(
                or_(
                    Product.name.ilike(like),
                    Product.sku.ilike(like),
                    Product.description.ilike(like),
                )
            )
        if category_id is not None:
            q = q.filter(Product.category_id == category_id)
        if supplier_id is not None:
            q = q.filter(Product.supplier_id == supplier_id)
        if status:
            q = q.filter(Product.status == status)
        if min_price is not None:
            q = q.filter(Product.price >= min_price)
        if max_price is not None:
            q = q.filter(Product.price <= max_price)
        return [ProductOut.model_validate(p) for p in q.order_by(Product.id)]


@app.get(
    "/api/products/{product_id}",
    response_model=ProductDetail,
    operation_id="get_product",
    summary="Get a product",
    description="Get a product with its category, supplier and stock in every warehouse.",
    tags=["catalog"],
)
def get_product(product_id: int = Path(..., description="Product ID.")) -> ProductDetail:
    with SessionLocal() as session:
        return product_detail(session, get_or_404(session, Product, product_id, "Product"))


@app.post(
    "/api/products",
    response_model=ProductDetail,
    status_code=201,
    operation_id="create_product",
    summary="Create a product",
    description="Add a product to the catalog with zero stock in every warehouse.",
    tags=["catalog"],
)
def create_product(body: ProductCreate) -> ProductDetail:
    with SessionLocal() as session:
        if session.query(Product).filter(Product.sku == body.sku).first():
            raise HTTPException(status_code=409, detail=f"SKU {body.sku} already exists")
        get_or_404(session, Category, body.category_id, "Category")
        supplier = get_or_404(session, Supplier, body.supplier_id, "Supplier")
        if not supplier.is_active:
            raise HTTPException(status_code=400, detail="Supplier is inactive")
        ts = now_str()
        p = Product(**body.model_dump(), created_at=ts, updated_at=ts)
        p.price = money(p.price)
        session.add(p)
        session.flush()
        for w in session.query(Warehouse).order_by(Warehouse.id):
            level(session, p.id, w.id, create=True)
        session.commit()
        return product_detail(session, p)


@app.patch(
    "/api/products/{product_id}",
    response_model=ProductDetail,
    operation_id="update_product",
    summary="Update a product",
    description="Change a product's name, description, category, supplier, price, cost or status.",
    tags=["catalog"],
)
def update_product(
    body: ProductUpdate, product_id: int = Path(..., description="Product ID.")
) -> ProductDetail:
    with SessionLocal() as session:
        p = get_or_404(session, Product, product_id, "Product")
        changes = body.model_dump(exclude_none=True)
        if "category_id" in changes:
            get_or_404(session, Category, changes["category_id"], "Category")
        supplier = get_or_404(
            session, Supplier, changes.get("supplier_id", p.supplier_id), "Supplier"
        )
        if changes.get("status", p.status) == "active" and not supplier.is_active:
            raise HTTPException(
                status_code=400, detail="Products of an inactive supplier cannot be active"
            )
        if "price" in changes:
            changes["price"] = money(changes["price"])
        for k, v in changes.items():
            setattr(p, k, v)
        p.updated_at = now_str()
        session.commit()
        return product_detail(session, p)


# ---------------------------------------------------------------- inventory


@app.get(
    "/api/warehouses",
    response_model=list[WarehouseOut],
    operation_id="list_warehouses",
    summary="List warehouses",
    description="List the fulfillment centers.",
    tags=["inventory"],
)
def list_warehouses() -> list[WarehouseOut]:
    with SessionLocal() as session:
        return [
            WarehouseOut.model_validate(w) for w in session.query(Warehouse).order_by(Warehouse.id)
        ]


@app.get(
    "/api/inventory",
    response_model=list[StockOut],
    operation_id="list_inventory",
    summary="List stock levels",
    description="List on-hand stock and reorder points, by product and/or warehouse; optionally only rows "
    "whose on-hand quantity is strictly below the reorder point.",
    tags=["inventory"],
)
def list_inventory(
    product_id: int | None = Query(None, description="Only this product."),
    warehouse_id: int | None = Query(None, description="Only this warehouse."),
    below_reorder_point: bool = Query(False, description="Only rows with on_hand < reorder_point."),
) -> list[StockOut]:
    with SessionLocal() as session:
        q = session.query(InventoryLevel)
        if product_id is not None:
            q = q.filter(InventoryLevel.product_id == product_id)
        if warehouse_id is not None:
            q = q.filter(InventoryLevel.warehouse_id == warehouse_id)
        if below_reorder_point:
            q = q.filter(InventoryLevel.on_hand < InventoryLevel.reorder_point)
        rows = q.order_by(InventoryLevel.warehouse_id, InventoryLevel.product_id)
        return [stock_out(session, r) for r in rows]


@app.post(
    "/api/inventory/adjustments",
    response_model=StockOut,
    status_code=201,
    operation_id="adjust_inventory",
    summary="Adjust stock",
    description="Record a manual stock change (damage, loss, found units, count correction, customer return).",
    tags=["inventory"],
)
def adjust_inventory(body: AdjustmentCreate) -> StockOut:
    with SessionLocal() as session:
        get_or_404(session, Product, body.product_id, "Product")
        get_or_404(session, Warehouse, body.warehouse_id, "Warehouse")
        if body.delta == 0:
            raise HTTPException(status_code=400, detail="delta must not be zero")
        row = level(session, body.product_id, body.warehouse_id, create=True)
        if row.on_hand + body.delta < 0:
            raise HTTPException(status_code=400, detail=f"Only {row.on_hand} units on hand")
        row.on_hand += body.delta
        move(session, body.product_id, body.warehouse_id, body.delta, body.reason, body.note)
        session.commit()
        return stock_out(session, row)


@app.post(
    "/api/inventory/transfers",
    response_model=list[StockOut],
    status_code=201,
    operation_id="transfer_stock",
    summary="Transfer stock",
    description="Move units of a product from one warehouse to another.",
    tags=["inventory"],
)
def transfer_stock(body: TransferCreate) -> list[StockOut]:
    with SessionLocal() as session:
        get_or_404(session, Product, body.product_id, "Product")
        src_w = get_or_404(session, Warehouse, body.from_warehouse_id, "Warehouse")
        dst_w = get_or_404(session, Warehouse, body.to_warehouse_id, "Warehouse")
        if src_w.id == dst_w.id:
            raise HTTPException(status_code=400, detail="Source and destination must differ")
        src = level(session, body.product_id, src_w.id, create=True)
        if src.on_hand < body.quantity:
            raise HTTPException(
                status_code=409, detail=f"Only {src.on_hand} units on hand in {src_w.code}"
            )
        dst = level(session, body.product_id, dst_w.id, create=True)
        src.on_hand -= body.quantity
        dst.on_hand += body.quantity
        move(session, body.product_id, src_w.id, -body.quantity, "transfer_out", f"To {dst_w.code}")
        move(session, body.product_id, dst_w.id, body.quantity, "transfer_in", f"From {src_w.code}")
        session.commit()
        return [stock_out(session, src), stock_out(session, dst)]


@app.put(
    "/api/inventory/reorder-point",
    response_model=StockOut,
    operation_id="set_reorder_point",
    summary="Set a reorder point",
    description="Set the reorder point of a product in one warehouse.",
    tags=["inventory"],
)
def set_reorder_point(body: ReorderPointSet) -> StockOut:
    with SessionLocal() as session:
        get_or_404(session, Product, body.product_id, "Product")
        get_or_404(session, Warehouse, body.warehouse_id, "Warehouse")
        row = level(session, body.product_id, body.warehouse_id, create=True)
        row.reorder_point = body.reorder_point
        session.commit()
        return stock_out(session, row)


# ---------------------------------------------------------------- orders


@app.get(
    "/api/orders",
    response_model=list[OrderOut],
    operation_id="list_orders",
    summary="List orders",
    description="List orders, newest first, filtered by status, customer, order number, warehouse or date.",
    tags=["orders"],
)
def list_orders(
    status: Literal["pending", "paid", "shipped", "delivered", "cancelled", "refunded"]
    | None = Query(None, description="Filter by status."),
    customer_id: int | None = Query(None, description="Only this customer's orders."),
    order_number: str | None = Query(None, description="Exact order number, e.g. SD-1042."),
    warehouse_id: int | None = Query(
        None, description="Only orders fulfilled from this warehouse."
    ),
    placed_after: str | None = Query(
        None, description="Placed on or after this date (YYYY-MM-DD)."
    ),
    placed_before: str | None = Query(None, description="Placed before this date (YYYY-MM-DD)."),
) -> list[OrderOut]:
    with SessionLocal() as session:
        q = session.query(Order)
        if status:
            q = q.filter(Order.status == status)
        if customer_id is not None:
            q = q.filter(Order.customer_id == customer_id)
        if order_number:
            q = q.filter(Order.order_number == order_number.strip().upper())
        if warehouse_id is not None:
            q = q.filter(Order.warehouse_id == warehouse_id)
        if placed_after:
            q = q.filter(Order.placed_at >= parse_date(placed_after))
        if placed_before:
            q = q.filter(Order.placed_at < parse_date(placed_before))
        return [
            OrderOut.model_validate(o) for o in q.order_by(Order.placed_at.desc(), Order.id.desc())
        ]


@app.get(
    "/api/orders/{order_id}",
    response_model=OrderDetail,
    operation_id="get_order",
    summary="Get an order",
    description="Get an order with its items, refunds and the amount that can still be refunded.",
    tags=["orders"],
)
def get_order(order_id: int = Path(..., description="Order ID.")) -> OrderDetail:
    with SessionLocal() as session:
        return order_detail(session, get_or_404(session, Order, order_id, "Order"))


@app.post(
    "/api/orders/{order_id}/ship",
    response_model=OrderDetail,
    operation_id="ship_order",
    summary="Ship an order",
    description="Mark a paid order as shipped with carrier and tracking number. Every item must be in stock "
    "in the order's warehouse; stock is decremented.",
    tags=["orders"],
)
def ship_order(
    body: ShipRequest, order_id: int = Path(..., description="Order ID.")
) -> OrderDetail:
    with SessionLocal() as session:
        o = get_or_404(session, Order, order_id, "Order")
        if o.status != "paid":
            raise HTTPException(
                status_code=409, detail=f"Only paid orders can ship (status is {o.status})"
            )
        if session.get(Customer, o.customer_id).is_blocked:
            raise HTTPException(status_code=409, detail="Customer account is blocked")
        items = session.query(OrderItem).filter(OrderItem.order_id == o.id).all()
        for it in items:
            row = level(session, it.product_id, o.warehouse_id)
            have = row.on_hand if row else 0
            if have < it.quantity:
                sku = session.get(Product, it.product_id).sku
                raise HTTPException(
                    status_code=409,
                    detail=f"{sku}: {it.quantity} needed but {have} on hand in warehouse {o.warehouse_id}",
                )
        for it in items:
            level(session, it.product_id, o.warehouse_id).on_hand -= it.quantity
            move(session, it.product_id, o.warehouse_id, -it.quantity, "shipment", o.order_number)
        o.status = "shipped"
        o.carrier = body.carrier
        o.tracking_number = body.tracking_number.strip()
        o.shipped_at = now_str()
        session.commit()
        return order_detail(session, o)


@app.post(
    "/api/orders/{order_id}/deliver",
    response_model=OrderDetail,
    operation_id="mark_order_delivered",
    summary="Mark delivered",
    description="Mark a shipped order as delivered.",
    tags=["orders"],
)
def mark_order_delivered(order_id: int = Path(..., description="Order ID.")) -> OrderDetail:
    with SessionLocal() as session:
        o = get_or_404(session, Order, order_id, "Order")
        if o.status != "shipped":
            raise HTTPException(
                status_code=409,
                detail=f"Only shipped orders can be delivered (status is {o.status})",
            )
        o.status = "delivered"
        session.commit()
        return order_detail(session, o)


@app.post(
    "/api/orders/{order_id}/cancel",
    response_model=OrderDetail,
    operation_id="cancel_order",
    summary="Cancel an order",
    description="Cancel a pending or paid order. Paid orders are refunded in full automatically.",
    tags=["orders"],
)
def cancel_order(
    body: CancelRequest, order_id: int = Path(..., description="Order ID.")
) -> OrderDetail:
    with SessionLocal() as session:
        o = get_or_404(session, Order, order_id, "Order")
        if o.status not in ("pending", "paid"):
            raise HTTPException(
                status_code=409, detail=f"Orders that are {o.status} cannot be cancelled"
            )
        if o.status == "paid":
            remaining = money(o.total - refunded_total(session, o.id))
            if remaining > 0:
                session.add(
                    Refund(
                        order_id=o.id,
                        amount=remaining,
                        reason=f"Order cancelled: {body.reason}",
                        created_at=now_str(),
                    )
                )
        o.status = "cancelled"
        session.commit()
        return order_detail(session, o)


@app.post(
    "/api/orders/{order_id}/refunds",
    response_model=OrderDetail,
    status_code=201,
    operation_id="issue_refund",
    summary="Refund an order",
    description="Refund part or all of a paid, shipped or delivered order. When the whole total has been "
    "refunded the order becomes 'refunded'.",
    tags=["orders"],
)
def issue_refund(
    body: RefundCreate, order_id: int = Path(..., description="Order ID.")
) -> OrderDetail:
    with SessionLocal() as session:
        o = get_or_404(session, Order, order_id, "Order")
        if o.status not in ("paid", "shipped", "delivered"):
            raise HTTPException(
                status_code=409, detail=f"Orders that are {o.status} cannot be refunded"
            )
        amount = money(body.amount)
        remaining = money(o.total - refunded_total(session, o.id))
        if amount > remaining:
            raise HTTPException(status_code=400, detail=f"At most {remaining:.2f} can be refunded")
        session.add(Refund(order_id=o.id, amount=amount, reason=body.reason, created_at=now_str()))
        if amount == remaining:
            o.status = "refunded"
        session.commit()
        return order_detail(session, o)


@app.get(
    "/api/refunds",
    response_model=list[RefundOut],
    operation_id="list_refunds",
    summary="List refunds",
    description="List refunds, optionally for one order or since a date.",
    tags=["orders"],
)
def list_refunds(
    order_id: int | None = Query(None, description="Only refunds of this order."),
    created_after: str | None = Query(
        None, description="Created on or after this date (YYYY-MM-DD)."
    ),
) -> list[RefundOut]:
    with SessionLocal() as session:
        q = session.query(Refund)
        if order_id is not None:
            q = q.filter(Refund.order_id == order_id)
        if created_after:
            q = q.filter(Refund.created_at >= parse_date(created_after))
        return [RefundOut.model_validate(r) for r in q.order_by(Refund.id)]


# ---------------------------------------------------------------- customers


@app.get(
    "/api/customers",
    response_model=list[CustomerOut],
    operation_id="list_customers",
    summary="List customers",
    description="Search customers by name, email or phone and filter by tier or blocked flag.",
    tags=["customers"],
)
def list_customers(
    search: str | None = Query(None, description="Case-insensitive match on name, email or phone."),
    tier: Literal["standard", "gold", "vip"] | None = Query(None, description="Filter by tier."),
    is_blocked: bool | None = Query(None, description="Filter by blocked flag."),
) -> list[CustomerOut]:
    with SessionLocal() as session:
        q = session.query(Customer)
        if search:
            like = f"%{search}%"
            q = q.filter(
                or_(
                    Customer.full_name.ilike(like),
                    Customer.email.ilike(like),
                    Customer.phone.ilike(like),
                )
            )
        if tier:
            q = q.filter(Customer.tier == tier)
        if is_blocked is not None:
            q = q.filter(Customer.is_blocked == (1 if is_blocked else 0))
        return [CustomerOut.model_validate(c) for c in q.order_by(Customer.id)]


def customer_detail(session, c: Customer) -> CustomerDetail:
    orders = session.query(Order).filter(Order.customer_id == c.id).all()
    spent = sum(o.total - refunded_total(session, o.id) for o in orders if o.status != "cancelled")
    return CustomerDetail(
        **CustomerOut.model_validate(c).model_dump(),
        order_count=len(orders),
        total_spent=money(spent),
    )


@app.get(
    "/api/customers/{customer_id}",
    response_model=CustomerDetail,
    operation_id="get_customer",
    summary="Get a customer",
    description="Get a customer with the number of orders and net amount spent.",
    tags=["customers"],
)
def get_customer(customer_id: int = Path(..., description="Customer ID.")) -> CustomerDetail:
    with SessionLocal() as session:
        return customer_detail(session, get_or_404(session, Customer, customer_id, "Customer"))


@app.patch(
    "/api/customers/{customer_id}",
    response_model=CustomerDetail,
    operation_id="update_customer",
    summary="Update a customer",
    description="Change a customer's name, phone, loyalty tier or blocked flag.",
    tags=["customers"],
)
def update_customer(
    body: CustomerUpdate, customer_id: int = Path(..., description="Customer ID.")
) -> CustomerDetail:
    with SessionLocal() as session:
        c = get_or_404(session, Customer, customer_id, "Customer")
        for k, v in body.model_dump(exclude_none=True).items():
            setattr(c, k, int(v) if k == "is_blocked" else v)
        session.commit()
        return customer_detail(session, c)


# ---------------------------------------------------------------- coupons


@app.get(
    "/api/coupons",
    response_model=list[CouponOut],
    operation_id="list_coupons",
    summary="List coupons",
    description="List discount codes, optionally only active ones or those matching a search.",
    tags=["coupons"],
)
def list_coupons(
    active_only: bool = Query(False, description="Only codes with is_active = true."),
    search: str | None = Query(None, description="Case-insensitive match on the code."),
) -> list[CouponOut]:
    with SessionLocal() as session:
        q = session.query(Coupon)
        if active_only:
            q = q.filter(Coupon.is_active == 1)
        if search:
            q = q.filter(Coupon.code.ilike(f"%{search}%"))
        return [CouponOut.model_validate(c) for c in q.order_by(Coupon.id)]


@app.post(
    "/api/coupons",
    response_model=CouponOut,
    status_code=201,
    operation_id="create_coupon",
    summary="Create a coupon",
    description="Create an active discount code.",
    tags=["coupons"],
)
def create_coupon(body: CouponCreate) -> CouponOut:
    with SessionLocal() as session:
        if body.discount_type == "percent" and body.value > 100:
            raise HTTPException(status_code=400, detail="Percent discounts cannot exceed 100")
        if session.query(Coupon).filter(Coupon.code == body.code).first():
            raise HTTPException(status_code=409, detail=f"Coupon {body.code} already exists")
        c = Coupon(
            code=body.code,
            discount_type=body.discount_type,
            value=money(body.value),
            min_order_total=money(body.min_order_total),
            max_redemptions=body.max_redemptions,
            times_redeemed=0,
            expires_at=parse_date(body.expires_at, end_of_day=True),
            is_active=1,
            created_at=now_str(),
        )
        session.add(c)
        session.commit()
        return CouponOut.model_validate(c)


@app.patch(
    "/api/coupons/{code}",
    response_model=CouponOut,
    operation_id="update_coupon",
    summary="Update a coupon",
    description="Change the value, minimum, limit or expiry of a coupon, or (de)activate it.",
    tags=["coupons"],
)
def update_coupon(
    body: CouponUpdate, code: str = Path(..., description="Coupon code, e.g. SUMMER20.")
) -> CouponOut:
    with SessionLocal() as session:
        c = session.query(Coupon).filter(Coupon.code == code.upper()).first()
        if c is None:
            raise HTTPException(status_code=404, detail=f"Coupon {code} not found")
        changes = body.model_dump(exclude_none=True)
        if c.discount_type == "percent" and changes.get("value", 0) > 100:
            raise HTTPException(status_code=400, detail="Percent discounts cannot exceed 100")
        if "max_redemptions" in changes and changes["max_redemptions"] < c.times_redeemed:
            raise HTTPException(
                status_code=400, detail=f"Already redeemed {c.times_redeemed} times"
            )
        if "expires_at" in changes:
            changes["expires_at"] = parse_date(changes["expires_at"], end_of_day=True)
        if "is_active" in changes:
            changes["is_active"] = int(changes["is_active"])
        for k, v in changes.items():
            setattr(c, k, v)
        session.commit()
        return CouponOut.model_validate(c)


# ---------------------------------------------------------------- suppliers & purchasing


@app.get(
    "/api/suppliers",
    response_model=list[SupplierOut],
    operation_id="list_suppliers",
    summary="List suppliers",
    description="List suppliers, optionally by name search or active flag.",
    tags=["purchasing"],
)
def list_suppliers(
    search: str | None = Query(None, description="Case-insensitive match on the supplier name."),
    is_active: bool | None = Query(None, description="Filter by active flag."),
) -> list[SupplierOut]:
    with SessionLocal() as session:
        q = session.query(Supplier)
        if search:
            q = q.filter(Supplier.name.ilike(f"%{search}%"))
        if is_active is not None:
            q = q.filter(Supplier.is_active == (1 if is_active else 0))
        return [SupplierOut.model_validate(s) for s in q.order_by(Supplier.id)]


@app.patch(
    "/api/suppliers/{supplier_id}",
    response_model=SupplierOut,
    operation_id="update_supplier",
    summary="Update a supplier",
    description="Change a supplier's contact or lead time, or deactivate it. Deactivation fails with 409 "
    "while the supplier has draft/submitted purchase orders or products that are not discontinued.",
    tags=["purchasing"],
)
def update_supplier(
    body: SupplierUpdate, supplier_id: int = Path(..., description="Supplier ID.")
) -> SupplierOut:
    with SessionLocal() as session:
        s = get_or_404(session, Supplier, supplier_id, "Supplier")
        if body.is_active is False and s.is_active:
            open_pos = (
                session.query(PurchaseOrder)
                .filter(
                    PurchaseOrder.supplier_id == s.id,
                    PurchaseOrder.status.in_(["draft", "submitted"]),
                )
                .count()
            )
            if open_pos:
                raise HTTPException(
                    status_code=409, detail=f"Supplier has {open_pos} open purchase order(s)"
                )
            live = (
                session.query(Product)
                .filter(Product.supplier_id == s.id, Product.status != "discontinued")
                .count()
            )
            if live:
                raise HTTPException(
                    status_code=409, detail=f"Supplier still has {live} non-discontinued product(s)"
                )
        if body.contact_email is not None:
            if "@" not in body.contact_email:
                raise HTTPException(status_code=400, detail="Invalid email address")
            s.contact_email = body.contact_email
        if body.lead_time_days is not None:
            s.lead_time_days = body.lead_time_days
        if body.is_active is not None:
            s.is_active = int(body.is_active)
        session.commit()
        return SupplierOut.model_validate(s)


@app.get(
    "/api/purchase-orders",
    response_model=list[POOut],
    operation_id="list_purchase_orders",
    summary="List purchase orders",
    description="List purchase orders filtered by supplier, warehouse or status.",
    tags=["purchasing"],
)
def list_purchase_orders(
    supplier_id: int | None = Query(None, description="Only this supplier."),
    warehouse_id: int | None = Query(None, description="Only this receiving warehouse."),
    status: Literal["draft", "submitted", "received", "cancelled"] | None = Query(
        None, description="Filter by status."
    ),
) -> list[POOut]:
    with SessionLocal() as session:
        q = session.query(PurchaseOrder)
        if supplier_id is not None:
            q = q.filter(PurchaseOrder.supplier_id == supplier_id)
        if warehouse_id is not None:
            q = q.filter(PurchaseOrder.warehouse_id == warehouse_id)
        if status:
            q = q.filter(PurchaseOrder.status == status)
        return [po_out(session, po) for po in q.order_by(PurchaseOrder.id)]


@app.get(
    "/api/purchase-orders/{purchase_order_id}",
    response_model=POOut,
    operation_id="get_purchase_order",
    summary="Get a purchase order",
    description="Get one purchase order with its lines.",
    tags=["purchasing"],
)
def get_purchase_order(
    purchase_order_id: int = Path(..., description="Purchase order ID."),
) -> POOut:
    with SessionLocal() as session:
        return po_out(
            session, get_or_404(session, PurchaseOrder, purchase_order_id, "Purchase order")
        )


@app.post(
    "/api/purchase-orders",
    response_model=POOut,
    status_code=201,
    operation_id="create_purchase_order",
    summary="Create a purchase order",
    description="Create a draft purchase order to an active supplier. Every line must be a product of that "
    "supplier and appear once.",
    tags=["purchasing"],
)
def create_purchase_order(body: POCreate) -> POOut:
    with SessionLocal() as session:
        s = get_or_404(session, Supplier, body.supplier_id, "Supplier")
        if not s.is_active:
            raise HTTPException(status_code=400, detail="Supplier is inactive")
        get_or_404(session, Warehouse, body.warehouse_id, "Warehouse")
        seen = set()
        for line in body.lines:
            p = get_or_404(session, Product, line.product_id, "Product")
            if p.supplier_id != s.id:
                raise HTTPException(status_code=400, detail=f"{p.sku} is not supplied by {s.name}")
            if p.id in seen:
                raise HTTPException(status_code=400, detail=f"{p.sku} appears more than once")
            seen.add(p.id)
        numbers = [n for (n,) in session.query(PurchaseOrder.po_number)]
        last = max(
            numbers, key=lambda n: int(n.rsplit("-", 1)[1]), default=f"PO-{now_str()[:4]}-000"
        )
        prefix, seq = last.rsplit("-", 1)
        ts = now_str()
        po = PurchaseOrder(
            po_number=f"{prefix}-{int(seq) + 1:03d}",
            supplier_id=s.id,
            warehouse_id=body.warehouse_id,
            status="draft",
            expected_at=parse_date(body.expected_at),
            created_at=ts,
        )
        session.add(po)
        session.flush()
        for line in body.lines:
            session.add(PurchaseOrderLine(purchase_order_id=po.id, **line.model_dump()))
        session.commit()
        return po_out(session, po)


def po_transition(purchase_order_id: int, allowed: tuple[str, ...], new_status: str) -> POOut:
    with SessionLocal() as session:
        po = get_or_404(session, PurchaseOrder, purchase_order_id, "Purchase order")
        if po.status not in allowed:
            raise HTTPException(status_code=409, detail=f"Purchase order is {po.status}")
        ts = now_str()
        if new_status == "submitted" and po.expected_at is None:
            lead = session.get(Supplier, po.supplier_id).lead_time_days
            po.expected_at = (datetime.now(timezone.utc) + timedelta(days=lead)).strftime(
                "%Y-%m-%d"
            )
        if new_status == "received":
            lines = session.query(PurchaseOrderLine).filter(
                PurchaseOrderLine.purchase_order_id == po.id
            )
            for line in lines:
                level(
                    session, line.product_id, po.warehouse_id, create=True
                ).on_hand += line.quantity
                move(
                    session,
                    line.product_id,
                    po.warehouse_id,
                    line.quantity,
                    "po_receipt",
                    po.po_number,
                )
            po.received_at = ts
        po.status = new_status
        session.commit()
        return po_out(session, po)


@app.post(
    "/api/purchase-orders/{purchase_order_id}/submit",
    response_model=POOut,
    operation_id="submit_purchase_order",
    summary="Submit a purchase order",
    description="Send a draft purchase order to the supplier.",
    tags=["purchasing"],
)
def submit_purchase_order(
    purchase_order_id: int = Path(..., description="Purchase order ID."),
) -> POOut:
    return po_transition(purchase_order_id, ("draft",), "submitted")


@app.post(
    "/api/purchase-orders/{purchase_order_id}/receive",
    response_model=POOut,
    operation_id="receive_purchase_order",
    summary="Receive a purchase order",
    description="Receive a submitted purchase order: all line quantities are added to the warehouse stock.",
    tags=["purchasing"],
)
def receive_purchase_order(
    purchase_order_id: int = Path(..., description="Purchase order ID."),
) -> POOut:
    return po_transition(purchase_order_id, ("submitted",), "received")


@app.post(
    "/api/purchase-orders/{purchase_order_id}/cancel",
    response_model=POOut,
    operation_id="cancel_purchase_order",
    summary="Cancel a purchase order",
    description="Cancel a draft or submitted purchase order.",
    tags=["purchasing"],
)
def cancel_purchase_order(
    purchase_order_id: int = Path(..., description="Purchase order ID."),
) -> POOut:
    return po_transition(purchase_order_id, ("draft", "submitted"), "cancelled")


if __name__ == "__main__":
    import uvicorn

    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
