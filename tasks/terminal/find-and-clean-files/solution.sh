#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}/data"
find . -type f -name '*.log' -size +10240c | sed 's|^\./||' | LC_ALL=C sort > ../large_logs.txt
find . -type f -empty -delete
