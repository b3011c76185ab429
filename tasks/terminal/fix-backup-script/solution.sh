#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
cat > backup.sh <<'SH'
#!/bin/bash
# Usage: backup.sh SOURCE_DIR DEST_DIR
#
# Creates DEST_DIR/<name>.tar.gz, where <name> is the last component of
# SOURCE_DIR. The archive holds the folder itself (entries start with
# "<name>/") without any *.tmp files. DEST_DIR is created when missing
# (including parent folders). On success it prints
#     backed up N files to DEST_DIR/<name>.tar.gz
# where N is the number of regular files in the archive (in all subfolders).
# Errors: missing arguments -> usage message on stderr, exit status 1;
#         SOURCE_DIR not a directory -> error on stderr, exit status 2.

SRC=${1:-}
DEST=${2:-}

if [ -z "$SRC" ] || [ -z "$DEST" ]; then
    echo "usage: backup.sh SOURCE_DIR DEST_DIR" >&2
    exit 1
fi
if [ ! -d "$SRC" ]; then
    echo "error: $SRC is not a directory" >&2
    exit 2
fi

SRC=${SRC%/}
mkdir -p "$DEST" || exit 1
NAME=$(basename "$SRC")
ARCHIVE="$DEST/$NAME.tar.gz"
tar -czf "$ARCHIVE" --exclude='*.tmp' -C "$(dirname "$SRC")" "$NAME" || exit 1
COUNT=$(find "$SRC" -type f ! -name '*.tmp' | wc -l)
echo "backed up $COUNT files to $ARCHIVE"
SH
chmod +x backup.sh
