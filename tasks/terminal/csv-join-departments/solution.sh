#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
python3 - <<'PY'
import csv

emps = list(csv.DictReader(open("employees.csv", newline="")))
depts = list(csv.DictReader(open("departments.csv", newline="")))
names = {e["id"]: e["name"] for e in emps}
known = {d["dept_id"] for d in depts}
groups = {d["dept_name"]: ([e for e in emps if e["dept_id"] == d["dept_id"]], names.get(d["manager_id"], ""))
          for d in depts}
unassigned = [e for e in emps if e["dept_id"] not in known]
if unassigned:
    groups["UNASSIGNED"] = (unassigned, "")
with open("dept_report.csv", "w", newline="") as fh:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(["dept_name", "headcount", "avg_salary", "manager"])
    for name in sorted(groups):
        members, manager = groups[name]
        avg = sum(float(e["salary"]) for e in members) / len(members) if members else 0.0
        w.writerow([name, len(members), f"{avg:.2f}", manager])
PY
