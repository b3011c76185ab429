import os
import sqlite3
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))


def db():
    path = APP / "inventory.db"
    assert path.is_file(), "inventory.db is missing"
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def test_table_schema():
    cols = db().execute("PRAGMA table_info(items)").fetchall()
    info = {name: (ctype.upper(), notnull, pk) for _, name, ctype, notnull, _, pk in cols}
    assert info["sku"][0] == "TEXT" and info["sku"][2] == 1
    assert info["name"] == ("TEXT", 1, 0)
    assert info["qty"] == ("INTEGER", 1, 0)
    assert info["price"] == ("REAL", 1, 0)


def test_rows_deduplicated_last_wins():
    rows = dict(db().execute("SELECT sku, qty FROM items").fetchall())
    assert rows == {"A-100": 12, "A-101": 4, "A-102": 40, "B-200": 1, "B-201": 8, "C-300": 2, "C-301": 25}


def test_values_cleaned_and_typed():
    con = db()
    assert con.execute("SELECT name, typeof(qty), price, typeof(price) FROM items WHERE sku='A-100'").fetchone() == (
        "Desk lamp", "integer", 24.99, "real")
    assert con.execute("SELECT price FROM items WHERE sku='A-101'").fetchone() == (3.75,)
    assert con.execute("SELECT name FROM items WHERE sku='A-102'").fetchone() == ("Pen, blue (10 pack)",)


def test_low_stock_view():
    con = db()
    kind = con.execute("SELECT type FROM sqlite_master WHERE name='low_stock'").fetchone()
    assert kind == ("view",)
    rows = sorted(con.execute("SELECT sku, name, qty FROM low_stock").fetchall())
    assert rows == [("A-101", "Notebook A5", 4), ("B-200", "Mug", 1), ("C-300", "Extension cord", 2)]
