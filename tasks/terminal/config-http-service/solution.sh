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
# Wait until it answers (one client polling, for up to 5 s; a server that exited
# -- a zombie until this script ends -- will not answer)
python3 - "$(cat server.pid)" <<'PY'
import sys
import time
import urllib.request

pid = sys.argv[1]
for _ in range(50):
    try:
        urllib.request.urlopen("http://127.0.0.1:18741/health", timeout=1)
        sys.exit(0)
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
    except OSError:
        break
    time.sleep(0.1)
sys.exit("server did not start")
PY
