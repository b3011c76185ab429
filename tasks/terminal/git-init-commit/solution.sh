#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}/project"
[ -d .git ] || git init -q -b main
git config user.name "Build Bot"
git config user.email "bot@example.invalid"
printf '*.log\nbuild/\n' > .gitignore
git add -A
git diff --cached --quiet || git commit -q -m "Initial commit"
