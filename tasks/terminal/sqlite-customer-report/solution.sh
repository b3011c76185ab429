#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
python3 - <<'PY'
import csv
import json
import sqlite3

db = sqlite3.connect("shop.db")
where = "o.status = 'paid' AND strftime('%Y', o.order_date) = '2024'"
rows = db.execute(f"""
    SELECT c.name, c.country, COUNT(DISTINCT o.id), SUM(i.qty * i.unit_price) AS total
    FROM customers c JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id
    WHERE {where}
    GROUP BY c.id ORDER BY total DESC, c.name
""").fetchall()
with open("report.csv", "w", newline="") as fh:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(["customer", "country", "orders", "total"])
    for name, country, n, total in rows:
        w.writerow([name, country, n, f"{total:.2f}"])
n, revenue = db.execute(f"""
    SELECT COUNT(DISTINCT o.id), SUM(i.qty * i.unit_price)
    FROM orders o JOIN order_items i ON i.order_id = o.id WHERE {where}
""").fetchone()
json.dump({"paid_orders_2024": n, "revenue_2024": round(revenue, 2)}, open("summary.json", "w"))
PY
