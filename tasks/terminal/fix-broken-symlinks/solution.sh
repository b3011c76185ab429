#!/bin/bash
set -euo pipefail
APP="${APP_DIR:-/app}"
cd "$APP/links"
broken=()
for l in * .[!.]*; do
  [ -L "$l" ] || continue
  [ -e "$l" ] || broken+=("$l")
done
# Idempotent: keep the list written by the first run.
if [ "${#broken[@]}" -gt 0 ] || [ ! -f "$APP/broken_links.txt" ]; then
  printf '%s\n' "${broken[@]}" | LC_ALL=C sort > "$APP/broken_links.txt"
  sed -i '/^$/d' "$APP/broken_links.txt"
fi
for l in "${broken[@]}"; do
  base=$(basename "$(readlink "$l")")
  if [ -f "$APP/targets/archive/$base" ]; then
    ln -sfn "../targets/archive/$base" "$l"
  else
    rm -f -- "$l"
  fi
done
