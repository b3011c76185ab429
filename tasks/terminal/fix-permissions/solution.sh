#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}/deploy"
chmod 755 bin/*.sh
chmod 700 secrets
find secrets -type f -exec chmod 600 {} +
chmod 644 config/app.conf
chmod 2775 shared
find . -type f -perm -o+w -exec chmod o-w {} +
