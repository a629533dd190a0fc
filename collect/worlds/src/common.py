"""Small helpers shared by the world sources and the builder."""

from typing import Any


def call(tool_name: str, **arguments: Any) -> dict:
    """One reference-solution tool call, with flat arguments as fastapi_mcp passes them."""
    return {"tool_name": tool_name, "arguments": arguments}


def sql_literal(value: Any) -> str:
    """Render a Python value as a SQLite literal for an INSERT statement."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"unsupported SQL value {value!r}")


def insert_statement(table: str, columns: list[str], row: tuple) -> str:
    if len(columns) != len(row):
        raise ValueError(f"{table}: {len(row)} values for {len(columns)} columns: {row!r}")
    values = ", ".join(sql_literal(v) for v in row)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values});"
