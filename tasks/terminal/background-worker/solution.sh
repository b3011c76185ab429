#!/bin/bash
set -euo pipefail
APP="${APP_DIR:-/app}"
cd "$APP"
if [ -f worker.pid ] && kill -0 "$(cat worker.pid)" 2>/dev/null \
   && tr '\0' ' ' < "/proc/$(cat worker.pid)/cmdline" | grep -q worker.py; then
  exit 0  # already running
fi
nohup python3 "$APP/worker.py" --log "$APP/worker.log" --interval 0.2 > /dev/null 2>&1 &
echo $! > worker.pid
sleep 0.3
