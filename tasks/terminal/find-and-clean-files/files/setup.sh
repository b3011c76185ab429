#!/bin/bash
# Builds the starting state of /app/data (sizes matter, so they are generated).
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -rf data
mkdir -p data/web/old data/db data/cache/tmp data/reports
mk() { mkdir -p "$(dirname "data/$1")"; head -c "$2" /dev/zero | tr '\0' "${3:-x}" > "data/$1"; }
mk web/access.log 20480
mk web/error.log 4096
mk web/old/access-2023.log 10241
mk web/old/error-2023.log 10240
mk db/slow.log 65536
mk db/db.log.bak 40000
mk db/notes.txt 30000
mk cache/tmp/build.log 12000
mk cache/tmp/ACCESS.LOG 50000
mk reports/summary.log 100
mk "reports/q1 results.log" 11000
: > data/web/old/empty.log
: > data/db/placeholder
: > data/cache/tmp/.lock
: > "data/reports/draft 2.txt"
