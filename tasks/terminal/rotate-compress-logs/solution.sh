#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}/logs"
# Already rotated (the current log is empty): nothing to do.
[ -s app.log ] || exit 0
rm -f app.log.4.gz
mv app.log.3.gz app.log.4.gz
mv app.log.2.gz app.log.3.gz
gzip -n app.log.1
mv app.log.1.gz app.log.2.gz
mode=$(stat -c %a app.log)
mv app.log app.log.1
: > app.log
chmod "$mode" app.log
