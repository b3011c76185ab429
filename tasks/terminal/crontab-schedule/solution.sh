#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
cat > crontab.txt <<'CRON'
SHELL=/bin/bash
# m   h  dom mon dow  command
30    2  *   *   *    /app/bin/backup.sh >> /app/logs/backup.log 2>&1
*/15  *  *   *   1-5  /app/bin/cleanup.sh >> /app/logs/cleanup.log 2>&1
0     8  1   *   *    /app/bin/report.sh >> /app/logs/report.log 2>&1
CRON
mkdir -p logs
chmod +x bin/backup.sh bin/cleanup.sh bin/report.sh
