#!/usr/bin/env bash
# Download the wheels that Terminal-Bench's official test bootstraps install at test time
# (pytest, pytest-json-ctrf, ...: agentenvs/envs/terminal/offline TEST_TIME_PACKAGES) into
# the project's wheelhouse, which the docker runtime serves to containers offline, and the
# binary wheels the published Dockerfiles pip-install most (pandas, scipy, numpy, ...:
# BUILD_TIME_PACKAGES, about 75 MB) into the build wheelhouse, which offline image builds
# get. Two pip downloads (seconds); idempotent. Needs a Python with pip (the project need
# not be installed): PYTHON (default .venv/bin/python, else python3).
# Usage: build_wheelhouse.sh [DEST [BUILD_DEST]] (defaults: $AGENTENVS_WHEELHOUSE_DIR, else
# $XDG_CACHE_HOME/agentenvs/wheelhouse; $AGENTENVS_BUILD_WHEELHOUSE_DIR, else
# $XDG_CACHE_HOME/agentenvs/wheelhouse-build).
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
print(offline.build_build_wheelhouse(Path(sys.argv[3]) if sys.argv[3] else None))
' "$ROOT/agentenvs/envs/terminal/offline/__init__.py" "${1:-}" "${2:-}")
for d in $DEST; do
  echo "build_wheelhouse.sh: $(ls "$d" | wc -l) wheels in $d ($(( $(date +%s) - T0 ))s)" >&2
done
