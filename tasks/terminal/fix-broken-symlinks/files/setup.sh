#!/bin/bash
# Creates /app/targets and a folder of symbolic links /app/links, some broken.
set -euo pipefail
APP="${APP_DIR:-/app}"
cd "$APP"
rm -rf links targets
mkdir -p links targets/archive targets/docs
echo "main config" > targets/app.conf
echo "db settings" > targets/db.conf
echo "old report" > targets/archive/report-2023.txt
echo "old notes" > targets/archive/notes.md
echo "guide" > targets/docs/guide.md
cd links
ln -s ../targets/app.conf app.conf                      # ok (relative)
ln -s "$APP/targets/db.conf" db.conf                    # ok (absolute)
ln -s ../targets/docs docs                              # ok (directory)
ln -s ../targets/report-2023.txt report.txt             # broken: moved to archive/
ln -s "$APP/targets/notes.md" notes.md                  # broken: moved to archive/
ln -s ../targets/removed.conf removed.conf              # broken: gone
ln -s ../targets/docs/missing.md "missing doc.md"       # broken: gone
ln -s loop-b loop-a                                     # broken: loop
ln -s loop-a loop-b                                     # broken: loop
echo "a plain file" > plain.txt
