#!/bin/bash
set -euo pipefail
APP="${APP_DIR:-/app}"
cd "$APP"
mkdir -p site
echo '<!doctype html><html><body><h1>Welcome to the harbour</h1></body></html>' > site/index.html
echo '{"status": "up", "version": 3}' > site/status.json
if [ -f http.pid ] && kill -0 "$(cat http.pid)" 2>/dev/null; then
  kill "$(cat http.pid)"; sleep 0.3
fi
nohup python3 -m http.server 18742 --bind 127.0.0.1 --directory "$APP/site" > /dev/null 2>&1 &
echo $! > http.pid
for _ in $(seq 50); do
  python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:18742/", timeout=1)' 2>/dev/null && exit 0
  sleep 0.1
done
echo "server did not start" >&2; exit 1
