#!/bin/bash
# Adds generated files (logs, build output) to /app/project.
set -euo pipefail
cd "${APP_DIR:-/app}/project"
rm -rf .git build
mkdir -p build/lib src/logs
echo "compiled" > build/lib/main.pyc.txt
echo "artifact" > build/app.bin
echo "2024-01-01 started" > app.log
echo "debug output" > src/logs/debug.log
