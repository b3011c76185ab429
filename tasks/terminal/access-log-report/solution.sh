#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
python3 - <<'PY'
import json
import re
from collections import Counter

pat = re.compile(r'^(\S+) \S+ \S+ \[[^\]]*\] "(\S+) (\S+) [^"]*" (\d{3}) (\S+)$')
ips, statuses, paths = set(), Counter(), Counter()
total = total_bytes = errors = 0
for line in open("logs/access.log"):
    m = pat.match(line.strip())
    if not m:
        continue
    ip, _method, path, status, size = m.groups()
    total += 1
    ips.add(ip)
    statuses[status] += 1
    paths[path.split("?", 1)[0]] += 1
    total_bytes += 0 if size == "-" else int(size)
    errors += int(status) >= 500
report = {
    "total_requests": total,
    "unique_ips": len(ips),
    "status_counts": dict(sorted(statuses.items())),
    "top_paths": [p for p, _ in sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:3]],
    "total_bytes": total_bytes,
    "server_errors": errors,
}
json.dump(report, open("report.json", "w"), indent=2)
PY
