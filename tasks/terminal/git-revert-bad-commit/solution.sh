#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}/repo"
git checkout -q main
if [ "$(git log -1 --format=%s)" != 'Revert "Set discount to 50 percent"' ]; then
  bad=$(git log --format=%H --grep='^Set discount to 50 percent$' -n 1)
  git revert --no-edit "$bad" >/dev/null
fi
