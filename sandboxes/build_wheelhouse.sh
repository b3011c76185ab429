#!/usr/bin/env bash
# Download the wheels that Terminal-Bench's official test bootstraps install at test time
# (pytest, pytest-json-ctrf, ...: agentenvs/envs/terminal/offline TEST_TIME_PACKAGES) into
# the project's wheelhouse, which the docker runtime serves to containers offline. One pip
# download (seconds); idempotent. Needs a Python with pip and the project importable:
# PYTHON (default .venv/bin/python, else python3). Usage: build_wheelhouse.sh [DEST]
# (default $AGENTENVS_WHEELHOUSE_DIR, else $XDG_CACHE_HOME/agentenvs/wheelhouse).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY=$ROOT/.venv/bin/python; else PY=python3; fi
fi
T0=$(date +%s)
DEST=$(cd "$ROOT" && PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c '
import sys
from pathlib import Path
from agentenvs.envs.terminal.offline import build_wheelhouse
print(build_wheelhouse(Path(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else None))
' "${1:-}")
echo "build_wheelhouse.sh: $(ls "$DEST" | wc -l) wheels in $DEST ($(( $(date +%s) - T0 ))s)" >&2
