#!/usr/bin/env bash
# Build agentenvs/peer-terminal-bench: Terminal-Bench's own harness (the `terminal-bench`
# package, which needs Python >= 3.12) with the docker CLI and Compose v2 it drives, so
# that benchmarks/peers/bench_terminal.py can run the peer beside TerminalBench-v0.
#
# - a Debian 13 "trixie" root filesystem from debootstrap (sandboxes/build_base_image.sh)
#   with Python 3.13, pip, Debian's docker-cli and docker-compose (v2) packages;
# - the wheels of terminal-bench and its dependencies for Python 3.13, fetched on this
#   machine by pip (its configured index), then installed in an image build that has no
#   network (`pip install --no-index`).
# The image talks to the host's engine through its socket, mounted at run time, so the
# task containers it starts are the engine's own (siblings, not nested).
#
# Idempotent: skips the work when the image carries the label of the same base and
# package version. Needs a running engine (.ci/services/docker.sh). Prints timings to
# stderr. Usage: build_terminal_bench_image.sh [--force]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FORCE=""
if [ "${1:-}" = "--force" ]; then FORCE=--force; fi
VERSION=${TERMINAL_BENCH_VERSION:-0.2.18}
IMAGE=${AGENTENVS_PEER_TB_IMAGE:-agentenvs/peer-terminal-bench:$VERSION}
BASE=agentenvs/base:trixie-peer
PACKAGES=bash,coreutils,findutils,grep,sed,tar,gzip,procps,python3,python3-pip,ca-certificates,\
docker-cli,docker-compose
LABEL_KEY=org.agentenvs.build-hash
PY=${PYTHON:-python3}
T0=$(date +%s)

say() { echo "build_terminal_bench_image.sh: $*" >&2; }

AGENTENVS_BASE_IMAGE=$BASE AGENTENVS_BASE_PACKAGES=$PACKAGES \
  bash "$ROOT/sandboxes/build_base_image.sh" $FORCE trixie

BASE_ID=$(docker image inspect -f '{{.Id}}' "$BASE")
WANT=$(printf '%s\n%s\n' "$BASE_ID" "$VERSION" | sha256sum | cut -c1-16)
HAVE=$(docker image inspect -f "{{index .Config.Labels \"$LABEL_KEY\"}}" "$IMAGE" 2>/dev/null || true)
if [ -z "$FORCE" ] && [ "$HAVE" = "$WANT" ]; then
  say "$IMAGE present ($WANT); nothing to do"
  exit 0
fi

CTX=$(mktemp -d /tmp/agentenvs-peer-tb.XXXXXX)
trap 'rm -rf "$CTX"' EXIT
say "fetching the wheels of terminal-bench==$VERSION for Python 3.13"
"$PY" -m pip download --quiet --dest "$CTX/wheels" --only-binary=:all: \
  --python-version 3.13 --implementation cp --abi cp313 --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any \
  "terminal-bench==$VERSION"
say "wheels fetched ($(du -sh "$CTX/wheels" | cut -f1), $(( $(date +%s) - T0 ))s)"

cat >"$CTX/Dockerfile" <<EOF
FROM $BASE
COPY wheels /tmp/wheels
RUN python3 -m pip install --no-index --find-links /tmp/wheels --break-system-packages \
      --no-compile --quiet "terminal-bench==$VERSION" \\
    && rm -rf /tmp/wheels \\
    && docker compose version \\
    && python3 -c 'import terminal_bench.terminal'
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
