#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
python3 - <<'PY'
import csv
import json

users = json.load(open("users.json"))
with open("users.csv", "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["id", "name", "email", "city", "tags"])
    for u in sorted((u for u in users if u.get("active") is True), key=lambda u: int(u["id"])):
        w.writerow([
            u["id"],
            u.get("name", ""),
            (u.get("contact") or {}).get("email", ""),
            (u.get("address") or {}).get("city", ""),
            ";".join(u.get("tags") or []),
        ])
PY
