#!/bin/bash
set -euo pipefail
APP="${APP_DIR:-/app}"
cd "$APP"
cat > config.json <<'JSON'
{
  "host": "127.0.0.1",
  "port": 18741,
  "greeting": "Hello from the lighthouse",
  "log_file": "logs/server.log"
}
JSON
mkdir -p logs
# Stop a previous instance, if any, then start in the background.
if [ -f server.pid ] && kill -0 "$(cat server.pid)" 2>/dev/null; then
  kill "$(cat server.pid)"; sleep 0.3
fi
nohup python3 "$APP/server.py" > logs/stdout.log 2>&1 &
echo $! > server.pid
# Wait until it answers.
for _ in $(seq 50); do
  python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:18741/health", timeout=1)' 2>/dev/null && exit 0
  sleep 0.1
done
echo "server did not start" >&2; exit 1
