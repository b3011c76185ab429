#!/usr/bin/env bash
# numpy and pandas for the interpreter that runs programs in the local sandbox: DeepCoder's
# official checker preloads them for every program (rules="official"). The sandbox uses the
# interpreter of the project's venv when its user can reach it, else the system python3:
# give both the two packages (Debian's for the system one, as in the Docker images).
set -euo pipefail
have() { "$1" -c "import numpy, pandas" >/dev/null 2>&1; }
if [ -x /usr/bin/python3 ] && ! have /usr/bin/python3; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq python3-numpy python3-pandas >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq python3-numpy python3-pandas >/dev/null
  }
fi
PY=$(command -v python3 || true)
if [ -n "$PY" ] && ! have "$PY"; then
  "$PY" -m pip install -q numpy pandas
fi
/usr/bin/python3 -c "import numpy, pandas" 2>/dev/null || { echo "sandbox-python.sh: numpy/pandas missing for /usr/bin/python3" >&2; exit 1; }
