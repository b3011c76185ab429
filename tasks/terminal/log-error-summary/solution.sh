#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
awk '$3 == "[ERROR]" { c = $4; sub(/:$/, "", c); n[c]++ } END { for (c in n) print c, n[c] }' logs/app.log \
  | sort -k2,2nr -k1,1 > error_counts.txt
