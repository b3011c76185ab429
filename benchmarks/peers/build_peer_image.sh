#!/usr/bin/env bash
# Build agentenvs/peer-<package>:<version>: a Terminal-Bench harness, `terminal-bench`
# (Terminal-Bench 1's) or `harbor` (Terminal-Bench 2's), both needing Python >= 3.12, with
# the docker CLI and Compose v2 they drive, so that benchmarks/peers/bench_terminal.py
# can run them beside TerminalBench-v0.
#
# - a Debian 13 "trixie" root filesystem from debootstrap (sandboxes/build_base_image.sh)
#   with Python 3.13, pip, Debian's docker-cli and docker-compose (v2) packages;
# - the wheels of the package and its dependencies for Python 3.13, fetched on this
#   machine by pip (its configured index), then installed in an image build that has no
#   network (`pip install --no-index`).
# The image talks to the host's engine through its socket, mounted at run time, so the
# task containers it starts are the engine's own (siblings, not nested).
#
# Idempotent: skips the work when the image carries the label of the same base and
# package version. Needs a running engine (.ci/services/docker.sh). Prints timings to
# stderr. Usage: build_peer_image.sh [--force] PACKAGE VERSION
# (e.g. terminal-bench 0.2.18, harbor 0.26.0; AGENTENVS_PEER_IMAGE names the image).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FORCE=""
if [ "${1:-}" = "--force" ]; then FORCE=--force; shift; fi
PACKAGE=${1:?usage: build_peer_image.sh [--force] PACKAGE VERSION}
VERSION=${2:?usage: build_peer_image.sh [--force] PACKAGE VERSION}
IMAGE=${AGENTENVS_PEER_IMAGE:-agentenvs/peer-$PACKAGE:$VERSION}
BASE=agentenvs/base:trixie-peer
DEBS=bash,coreutils,findutils,grep,sed,tar,gzip,procps,python3,python3-pip,ca-certificates,\
docker-cli,docker-compose
LABEL_KEY=org.agentenvs.build-hash
PY=${PYTHON:-python3}
T0=$(date +%s)

say() { echo "build_peer_image.sh: $*" >&2; }

AGENTENVS_BASE_IMAGE=$BASE AGENTENVS_BASE_PACKAGES=$DEBS \
  bash "$ROOT/sandboxes/build_base_image.sh" $FORCE trixie

BASE_ID=$(docker image inspect -f '{{.Id}}' "$BASE")
WANT=$(printf '%s\n%s==%s\n' "$BASE_ID" "$PACKAGE" "$VERSION" | sha256sum | cut -c1-16)
HAVE=$(docker image inspect -f "{{index .Config.Labels \"$LABEL_KEY\"}}" "$IMAGE" 2>/dev/null || true)
OLD_ID=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if [ -z "$FORCE" ] && [ "$HAVE" = "$WANT" ]; then
  say "$IMAGE present ($WANT); nothing to do"
  exit 0
fi

CTX=$(mktemp -d /tmp/agentenvs-peer.XXXXXX)
trap 'rm -rf "$CTX"' EXIT
say "fetching the wheels of $PACKAGE==$VERSION for Python 3.13"
if ! "$PY" -m pip download --quiet --dest "$CTX/wheels" --only-binary=:all: \
  --python-version 3.13 --implementation cp --abi cp313 --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any \
  "$PACKAGE==$VERSION" >"$CTX/pip.log" 2>&1; then
  grep -v 'is ignored' "$CTX/pip.log" | tail -n 5 >&2
  exit 1
fi
say "wheels fetched ($(du -sh "$CTX/wheels" | cut -f1), $(( $(date +%s) - T0 ))s)"

cat >"$CTX/Dockerfile" <<EOF
FROM $BASE
COPY wheels /tmp/wheels
RUN python3 -m pip install --no-index --find-links /tmp/wheels --break-system-packages \
      --no-compile --quiet "$PACKAGE==$VERSION" \\
    && rm -rf /tmp/wheels \\
    && docker compose version \\
    && python3 -c 'import importlib.metadata as m; print(m.version("$PACKAGE"))'
ENV LANG=C.UTF-8 PYTHONUNBUFFERED=1
CMD ["python3"]
EOF
LOG="$CTX/build.log"
if ! DOCKER_BUILDKIT=0 docker build --network none --label "$LABEL_KEY=$WANT" -t "$IMAGE" \
  "$CTX" >"$LOG" 2>&1; then
  tail -n 30 "$LOG" >&2
  exit 1
fi
say "built $IMAGE ($(( $(date +%s) - T0 ))s total)"
# the image this tag named before (built here: it carried our label), now untagged
if [ -n "$HAVE" ] && [ -n "$OLD_ID" ] && [ "$OLD_ID" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]; then
  docker rmi "$OLD_ID" >/dev/null 2>&1 || true
fi
