#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}/repo"
git checkout -q main
leak=$(git log --reverse --format=%H -S 'sk-live-')
leak=${leak%%$'\n'*}
echo "$leak" > ../leak_commit.txt
key=$(git show "$leak:settings.py" | sed -n 's/^API_KEY = "\(sk-live-[^"]*\)"$/\1/p')
echo "API_KEY=$key" > secrets.env
grep -qx 'secrets.env' .gitignore || echo 'secrets.env' >> .gitignore
sed -i 's/^API_KEY = "sk-live-[^"]*"$/API_KEY = os.environ.get("API_KEY", "")/' settings.py
git add .gitignore settings.py
git diff --cached --quiet || git commit -q -m "Read the API key from the environment"
