#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}/repo"
if ! git rev-parse -q --verify refs/heads/feature/multiply >/dev/null; then
  git checkout -q -b feature/multiply main
  cat >> calc.py <<'PY'


def multiply(a, b):
    return a * b
PY
  git add calc.py
  git commit -q -m "Add multiply"
fi
git checkout -q main
