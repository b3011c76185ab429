import csv
import json
import os
import sqlite3
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))


def expected():
    db = sqlite3.connect(f"file:{APP / 'shop.db'}?mode=ro", uri=True)
    per_order = db.execute(
        """SELECT o.id, o.customer_id, SUM(i.qty * i.unit_price)
           FROM orders o JOIN order_items i ON i.order_id = o.id
           WHERE o.status = 'paid' AND o.order_date >= '2024-01-01' AND o.order_date < '2025-01-01'
           GROUP BY o.id"""
    ).fetchall()
    customers = {cid: (name, country) for cid, name, country in db.execute("SELECT * FROM customers")}
    db.close()
    agg = {}
    for _, cid, amount in per_order:
        n, total = agg.get(cid, (0, 0.0))
        agg[cid] = (n + 1, total + amount)
    rows = [[*customers[cid], str(n), f"{total:.2f}"] for cid, (n, total) in agg.items()]
    rows.sort(key=lambda r: (-float(r[3]), r[0]))
    return rows, len(per_order), round(sum(a for *_, a in per_order), 2)


def report():
    with open(APP / "report.csv", newline="") as fh:
        return [r for r in csv.reader(fh) if r]


def test_database_untouched():
    db = sqlite3.connect(f"file:{APP / 'shop.db'}?mode=ro", uri=True)
    assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 70
    assert db.execute("SELECT COUNT(*) FROM customers").fetchone()[0] == 10


def test_report_header():
    assert report()[0] == ["customer", "country", "orders", "total"]


def test_report_customers_and_counts():
    rows, _, _ = expected()
    assert {r[0]: r[2] for r in report()[1:]} == {r[0]: r[2] for r in rows}


def test_report_totals_and_order():
    rows, _, _ = expected()
    assert report()[1:] == rows


def test_summary():
    _, n, revenue = expected()
    summary = json.loads((APP / "summary.json").read_text())
    assert summary["paid_orders_2024"] == n
    assert abs(summary["revenue_2024"] - revenue) < 0.005
