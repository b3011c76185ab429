#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
mkdir -p backup
tar -czf backup/project.tar.gz --exclude='project/cache' --exclude='*.tmp' project
cd backup && sha256sum project.tar.gz > project.tar.gz.sha256
