#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}/photos"
shopt -s nullglob nocaseglob
for f in IMG_*.*; do
  if [[ "$f" =~ ^[Ii][Mm][Gg]_([0-9]+)\.([A-Za-z]+)$ ]]; then
    digits="${BASH_REMATCH[1]}"
    ext="$(printf '%s' "${BASH_REMATCH[2]}" | tr 'A-Z' 'a-z')"
    case "$ext" in
      jpeg) ext=jpg ;;
      jpg|png) ;;
      *) continue ;;
    esac
    mv -- "$f" "photo_${digits}.${ext}"
  fi
done
