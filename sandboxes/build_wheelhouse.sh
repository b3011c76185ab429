#!/usr/bin/env bash
# Download the wheels that Terminal-Bench's official test bootstraps install at test time
# (pytest, pytest-json-ctrf, ...: agentenvs/envs/terminal/offline TEST_TIME_PACKAGES) into
# the project's wheelhouse, which the docker runtime serves to containers offline. One pip
# download (seconds); idempotent. Needs a Python with pip (the project need not be installed):
# PYTHON (default .venv/bin/python, else python3). Usage: build_wheelhouse.sh [DEST]
# (default $AGENTENVS_WHEELHOUSE_DIR, else $XDG_CACHE_HOME/agentenvs/wheelhouse).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY=$ROOT/.venv/bin/python; else PY=python3; fi
fi
T0=$(date +%s)
# the offline module is read by its path (it needs only the standard library), so this
# runs before the project and its dependencies are installed
DEST=$("$PY" -c '
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("agentenvs_offline", sys.argv[1])
offline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(offline)
print(offline.build_wheelhouse(Path(sys.argv[2]) if sys.argv[2] else None))
' "$ROOT/agentenvs/envs/terminal/offline/__init__.py" "${1:-}")
echo "build_wheelhouse.sh: $(ls "$DEST" | wc -l) wheels in $DEST ($(( $(date +%s) - T0 ))s)" >&2
