#!/bin/bash
# Creates /app/logs with a current log and four rotated generations.
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -rf logs && mkdir logs && cd logs
gen() { for i in 1 2 3; do echo "$1 line $i"; done; }
gen "current" > app.log
gen "generation 1" > app.log.1
for n in 2 3 4; do gen "generation $n" | gzip -n > "app.log.$n.gz"; done
gen "worker current" > worker.log
gen "worker generation 1" > worker.log.1
chmod 640 app.log
