#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}/repo"
git checkout -q main
if ! git merge-base --is-ancestor feature/timeouts main; then
  git merge --no-ff --no-edit feature/timeouts >/dev/null 2>&1 || true
  cat > config.ini <<'INI'
[server]
host = 0.0.0.0
port = 8080
timeout = 60
workers = 8
retries = 3

[logging]
level = info
format = json
INI
  git add config.ini
  git commit -q --no-edit
fi
