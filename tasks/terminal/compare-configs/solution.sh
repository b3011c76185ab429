#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
norm() { grep -vE '^[[:space:]]*(#|$)' "$1" | sed -E 's/^[[:space:]]*([^=]*[^=[:space:]])[[:space:]]*=[[:space:]]*(.*[^[:space:]])?[[:space:]]*$/\1=\2/' | LC_ALL=C sort; }
norm old.conf > /tmp/old.$$
norm new.conf > /tmp/new.$$
LC_ALL=C join -t= -v2 <(cut -d= -f1 /tmp/old.$$) <(cut -d= -f1 /tmp/new.$$) > added_keys.txt
LC_ALL=C join -t= -v1 <(cut -d= -f1 /tmp/old.$$) <(cut -d= -f1 /tmp/new.$$) > removed_keys.txt
LC_ALL=C join -t= /tmp/old.$$ /tmp/new.$$ | awk -F= '$2 != $3 { print $1 ": " $2 " -> " $3 }' > changed.txt
rm -f /tmp/old.$$ /tmp/new.$$
