#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
cat > cleanup.sh <<'SH'
#!/bin/bash
# Usage: cleanup.sh [--dry-run] DIR DAYS
usage() { echo "usage: cleanup.sh [--dry-run] DIR DAYS" >&2; exit 2; }
dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
[ $# -eq 2 ] || usage
dir=$1 days=$2
[ -d "$dir" ] || usage
[[ "$days" =~ ^[0-9]+$ ]] || usage
dir=${dir%/}

mapfile -d '' old < <(find "$dir" -type f ! -name .keep -mtime +"$days" -print0 | LC_ALL=C sort -z)
if [ "$dry" -eq 1 ]; then
    for f in "${old[@]}"; do printf '%s\n' "$f"; done
    echo "would remove ${#old[@]} files"
    exit 0
fi
# directories that are empty before the run are kept
mapfile -d '' empty_before < <(find "$dir" -mindepth 1 -type d -empty -print0)
for f in "${old[@]}"; do rm -f -- "$f"; done
# deepest first, so that folders emptied by removing their subfolders go too
mapfile -d '' dirs < <(find "$dir" -mindepth 1 -depth -type d -print0)
for d in "${dirs[@]}"; do
    keep=0
    for e in "${empty_before[@]}"; do [ "$e" = "$d" ] && keep=1 && break; done
    [ "$keep" -eq 1 ] || rmdir -- "$d" 2>/dev/null || true
done
echo "removed ${#old[@]} files"
SH
chmod +x cleanup.sh
