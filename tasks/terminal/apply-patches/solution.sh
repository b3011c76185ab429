#!/bin/bash
set -euo pipefail
APP="${APP_DIR:-/app}"
cd "$APP/src"
: > "$APP/failed_patches.txt"
for p in "$APP"/patches/*.patch; do
  if git apply --check "$p" 2>/dev/null; then
    git apply "$p"
  elif git apply --check --reverse "$p" 2>/dev/null; then
    :  # already applied (re-run)
  else
    basename "$p" >> "$APP/failed_patches.txt"
  fi
done
