#!/usr/bin/env bash
# Build every sandbox image offline: the Debian base, then the images on top of it.
#
# Needs a running Docker engine (see .ci/services/docker.sh). Skips images that are
# present unless --force is given. Usage: sandboxes/build_images.sh [--force]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
FORCE=""
if [ "${1:-}" = "--force" ]; then FORCE=--force; fi
HOST_SUITE=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
SUITE=${AGENTENVS_BASE_SUITE:-${HOST_SUITE:-bookworm}}
BASE=agentenvs/base:$SUITE
PYTHON_IMAGE=${AGENTENVS_DOCKER_IMAGE:-agentenvs/python:latest}

say() { echo "build_images.sh: $*" >&2; }

AGENTENVS_BASE_IMAGE=$BASE bash "$HERE/build_base_image.sh" $FORCE "$SUITE"

if [ -z "$FORCE" ] && docker image inspect "$PYTHON_IMAGE" >/dev/null 2>&1; then
  say "$PYTHON_IMAGE present; nothing to do"
  exit 0
fi
T0=$(date +%s)
# the classic builder with no network: nothing is fetched while building, and it works on
# engines without BuildKit or a bridge network
LOG=$(mktemp /tmp/agentenvs-build.XXXXXX.log)
if ! DOCKER_BUILDKIT=0 docker build --network none --build-arg "BASE_IMAGE=$BASE" \
  -t "$PYTHON_IMAGE" "$HERE/python" >"$LOG" 2>&1; then
  tail -n 30 "$LOG" >&2
  exit 1
fi
rm -f "$LOG"
say "built $PYTHON_IMAGE ($(( $(date +%s) - T0 ))s)"
