#!/bin/bash
# Creates the SQLite database /app/shop.db (deterministic content).
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -f shop.db
python3 - <<'PY'
import random
import sqlite3

rng = random.Random(2024)
db = sqlite3.connect("shop.db")
db.executescript("""
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    order_date TEXT NOT NULL,          -- YYYY-MM-DD
    status TEXT NOT NULL               -- paid, cancelled or refunded
);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders(id),
    product TEXT NOT NULL,
    qty INTEGER NOT NULL,
    unit_price REAL NOT NULL
);
""")
names = ["Aino", "Bilal", "Carmen", "Dmitri", "Efua", "Farid", "Greta", "Hiro", "Ilse", "Jonas"]
countries = ["FI", "PK", "ES", "RU", "GH", "EG", "SE", "JP", "NL", "DE"]
for i, (n, c) in enumerate(zip(names, countries), start=1):
    db.execute("INSERT INTO customers VALUES (?, ?, ?)", (i, n, c))
products = [("pen", 1.25), ("notebook", 3.5), ("lamp", 24.99), ("mug", 7.0), ("bag", 15.75)]
oid = 0
for _ in range(70):
    oid += 1
    cust = rng.randint(1, 9)  # customer 10 never orders
    year = rng.choice([2023, 2024, 2024, 2024, 2025])
    date = f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    status = rng.choice(["paid"] * 6 + ["cancelled", "refunded"])
    db.execute("INSERT INTO orders VALUES (?, ?, ?, ?)", (oid, cust, date, status))
    for _ in range(rng.randint(1, 3)):
        prod, price = rng.choice(products)
        db.execute("INSERT INTO order_items VALUES (?, ?, ?, ?)", (oid, prod, rng.randint(1, 5), price))
db.commit()
db.close()
PY
