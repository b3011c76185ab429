#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
mapfile -t versions < <(ls releases | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sort -V -r)
ln -sfn "releases/${versions[0]}" current
ln -sfn "releases/${versions[1]}" previous
mkdir -p bin
ln -sfn ../current/tool.sh bin/tool
