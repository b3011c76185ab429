#!/bin/bash
set -euo pipefail
APP="${APP_DIR:-/app}"
cd "$APP/incoming"
rm -rf "$APP/extracted"
mkdir -p "$APP/extracted"
: > "$APP/rejected.txt.new"
for archive in *.tar.gz; do
  name="${archive%.tar.gz}"
  expected=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1 }' SHA256SUMS)
  actual=$(sha256sum "$archive" | cut -d' ' -f1)
  if [ -n "$expected" ] && [ "$expected" = "$actual" ]; then
    mkdir -p "$APP/extracted/$name"
    tar -xzf "$archive" -C "$APP/extracted/$name"
  else
    echo "$archive" >> "$APP/rejected.txt.new"
  fi
done
sort "$APP/rejected.txt.new" > "$APP/rejected.txt"
rm -f "$APP/rejected.txt.new"
