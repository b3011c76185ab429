#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
python3 - <<'PY'
import csv
from collections import defaultdict
from decimal import Decimal

agg = defaultdict(lambda: [0, 0, Decimal("0")])
with open("sales.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        a = agg[row["region"]]
        a[0] += 1
        a[1] += int(row["units"])
        a[2] += int(row["units"]) * Decimal(row["unit_price"])
with open("summary.csv", "w", newline="") as fh:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(["region", "orders", "units", "revenue"])
    for region, (orders, units, revenue) in sorted(agg.items(), key=lambda kv: -kv[1][2]):
        w.writerow([region, orders, units, f"{revenue:.2f}"])
PY
