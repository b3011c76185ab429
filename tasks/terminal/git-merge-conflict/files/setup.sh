#!/bin/bash
# Creates /app/repo: main and feature/timeouts both edit config.ini (a conflict).
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -rf repo && mkdir repo && cd repo
git init -q -b main
git config user.name "Dana Developer"
git config user.email "dana@example.invalid"
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2024-03-0${n}T08:00:00+0000" GIT_COMMITTER_DATE="2024-03-0${n}T08:00:00+0000"
  git add -A && git commit -q -m "$1"
}
cat > config.ini <<'INI'
[server]
host = 0.0.0.0
port = 8080
timeout = 30

[logging]
level = info
INI
commit "Add config"
git checkout -q -b feature/timeouts
sed -i 's/^timeout = 30$/timeout = 60\nretries = 3/' config.ini
commit "Raise timeout and add retries"
sed -i 's/^level = info$/level = info\nformat = json/' config.ini
commit "Log as JSON"
git checkout -q main
sed -i 's/^timeout = 30$/timeout = 45\nworkers = 8/' config.ini
commit "Tune server workers"
