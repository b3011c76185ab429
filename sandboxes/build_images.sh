#!/usr/bin/env bash
# Build every sandbox image offline: the Debian base, then the images on top of it, then
# the MariaDB server image (a root filesystem of its own: build_mariadb_image.sh).
#
# Needs a running Docker engine (see .ci/services/docker.sh). An image on top of the base
# is labelled with a hash of the base image id and its build folder, and rebuilt when
# that hash changes (a new package list in the base, an edited Dockerfile); --force
# rebuilds everything. Usage: sandboxes/build_images.sh [--force]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
FORCE=""
if [ "${1:-}" = "--force" ]; then FORCE=--force; fi
HOST_SUITE=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
SUITE=${AGENTENVS_BASE_SUITE:-${HOST_SUITE:-bookworm}}
BASE=agentenvs/base:$SUITE
PYTHON_IMAGE=${AGENTENVS_DOCKER_IMAGE:-agentenvs/python:latest}
TERMINAL_IMAGE=${AGENTENVS_TERMINAL_IMAGE:-agentenvs/terminal:latest}
MARIADB_IMAGE=${AGENTENVS_MARIADB_IMAGE:-agentenvs/mariadb:latest}
MARIADB_ROOTFS=agentenvs/mariadb-rootfs:$SUITE
LABEL_KEY=org.agentenvs.build-hash

say() { echo "build_images.sh: $*" >&2; }

AGENTENVS_BASE_IMAGE=$BASE bash "$HERE/build_base_image.sh" $FORCE "$SUITE"

# build_on_base IMAGE DIR [BASE]: build DIR's Dockerfile FROM BASE (default: the base)
# unless an image with the same base id and folder contents is present
build_on_base() {
  local image=$1 dir=$2 base=${3:-$BASE} base_id want have t0 log
  base_id=$(docker image inspect -f '{{.Id}}' "$base")
  want=$( { echo "$base_id"; cd "$dir" && find . -type f | LC_ALL=C sort | xargs sha256sum; } \
    | sha256sum | cut -c1-16)
  have=$(docker image inspect -f "{{index .Config.Labels \"$LABEL_KEY\"}}" "$image" \
    2>/dev/null || true)
  if [ -z "$FORCE" ] && [ "$have" = "$want" ]; then
    say "$image present ($want); nothing to do"
    return 0
  fi
  t0=$(date +%s)
  # the classic builder with no network: nothing is fetched while building, and it
  # works on engines without BuildKit or a bridge network
  log=$(mktemp /tmp/agentenvs-build.XXXXXX.log)
  if ! DOCKER_BUILDKIT=0 docker build --network none --build-arg "BASE_IMAGE=$base" \
    --label "$LABEL_KEY=$want" -t "$image" "$dir" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    exit 1
  fi
  rm -f "$log"
  say "built $image ($(( $(date +%s) - t0 ))s)"
}

build_on_base "$PYTHON_IMAGE" "$HERE/python"
build_on_base "$TERMINAL_IMAGE" "$HERE/terminal"

# Terminal-Bench's official bases, offline (agentenvs/envs/terminal/images.py maps their
# names to these): Debian 13 "trixie" gives Python 3.13, as python:3.13 and the t-bench
# images have, plus the tools of the official images and test bootstraps. About 2-3 min
# of debootstrap once; AGENTENVS_SKIP_TB_IMAGES=1 skips them.
TB_BASE=agentenvs/base:trixie-tb
TB_PACKAGES=bash,coreutils,findutils,grep,sed,mawk,tar,gzip,xz-utils,bzip2,unzip,procps,git,\
python3,python3-pytest,python3-venv,python3-pip,python-is-python3,sqlite3,ca-certificates,curl,\
tmux,asciinema,patch,diffutils,file,jq,less
if [ "${AGENTENVS_SKIP_TB_IMAGES:-0}" != 1 ]; then
  AGENTENVS_BASE_IMAGE=$TB_BASE AGENTENVS_BASE_PACKAGES=$TB_PACKAGES \
    bash "$HERE/build_base_image.sh" $FORCE trixie
  build_on_base agentenvs/tb-debian:13 "$HERE/images/tb-debian" "$TB_BASE"
  build_on_base agentenvs/tb-python:3.13 "$HERE/images/tb-python" "$TB_BASE"
fi

# the MariaDB server has a root filesystem of its own (mariadb-server cannot be installed
# in an offline build)
AGENTENVS_MARIADB_ROOTFS_IMAGE=$MARIADB_ROOTFS bash "$HERE/build_mariadb_image.sh" $FORCE "$SUITE"
build_on_base "$MARIADB_IMAGE" "$HERE/mariadb" "$MARIADB_ROOTFS"
