#!/usr/bin/env bash
# The local sandbox runs programs with the system python3 (the one an unprivileged user can
# reach): give it numpy and pandas, which DeepCoder's official checker preloads for every
# program (rules="official"). Debian's packages, as in the Docker images.
set -euo pipefail
if python3 -c "import numpy, pandas" >/dev/null 2>&1 && /usr/bin/python3 -c "import numpy, pandas" >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq python3-numpy python3-pandas >/dev/null 2>&1 || {
  apt-get update -qq
  apt-get install -y -qq python3-numpy python3-pandas >/dev/null
}
/usr/bin/python3 -c "import numpy, pandas"
