#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -f inventory.db
python3 - <<'PY'
import csv
import sqlite3

con = sqlite3.connect("inventory.db")
con.executescript("""
CREATE TABLE items (sku TEXT PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL, price REAL NOT NULL);
CREATE VIEW low_stock AS SELECT sku, name, qty FROM items WHERE qty < 5;
""")
with open("inventory.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        row = {k: v.strip() for k, v in row.items()}
        con.execute("INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?)",
                    (row["sku"], row["name"], int(row["qty"]), float(row["price"].lstrip("$"))))
con.commit()
PY
