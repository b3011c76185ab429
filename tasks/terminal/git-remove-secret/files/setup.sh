#!/bin/bash
# Creates /app/repo, where one commit added a live API key to settings.py.
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -rf repo && mkdir repo && cd repo
git init -q -b main
git config user.name "Dana Developer"
git config user.email "dana@example.invalid"
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2024-04-0${n}T12:00:00+0000" GIT_COMMITTER_DATE="2024-04-0${n}T12:00:00+0000"
  git add -A && git commit -q -m "$1"
}
cat > settings.py <<'PY'
import os

DEBUG = False
SERVICE_URL = "https://api.example.invalid/v2"
PY
commit "Add settings"
printf 'def fetch(client):\n    return client.get("/items")\n' > client.py
commit "Add client"
sed -i 's|^SERVICE_URL = .*|&\nAPI_KEY = "sk-live-4f9a1c2e7b"|' settings.py
commit "Configure service access"
printf 'TIMEOUT = 10\n' >> settings.py
commit "Add timeout"
printf '__pycache__/\n' > .gitignore
commit "Ignore caches"
