#!/usr/bin/env bash
# Build the offline base image agentenvs/base:<suite> from Debian packages (no registry).
#
# debootstrap (its default mirror) installs a minimal Debian with python3 into a temp dir,
# which `docker import` turns into an image. Skips the work when the image is present
# unless --force is given. Usage: build_base_image.sh [--force] [SUITE]
# (SUITE defaults to the host's Debian codename, else bookworm).
set -euo pipefail

FORCE=0
if [ "${1:-}" = "--force" ]; then FORCE=1; shift; fi
HOST_SUITE=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
SUITE=${1:-${HOST_SUITE:-bookworm}}
IMAGE=${AGENTENVS_BASE_IMAGE:-agentenvs/base:$SUITE}
# what the sandboxes use: python3 for programs and the test-case worker, coreutils'
# `timeout`, tar for file transfers, procps for inspecting processes
INCLUDE=python3,procps,ca-certificates

say() { echo "build_base_image.sh: $*" >&2; }

if [ "$FORCE" = 0 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "$IMAGE present; nothing to do"
  exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq debootstrap >/dev/null
fi

T0=$(date +%s)
ROOTFS=$(mktemp -d /tmp/agentenvs-rootfs.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT
say "debootstrap $SUITE (minbase + $INCLUDE) into $ROOTFS"
debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOTFS" \
  >"$ROOTFS.log" 2>&1 || { tail -n 30 "$ROOTFS.log" >&2; exit 1; }
rm -f "$ROOTFS.log"
say "debootstrap done ($(( $(date +%s) - T0 ))s)"

# a smaller image: package caches and docs are not needed at run time
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
  "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/*

tar -C "$ROOTFS" --numeric-owner -c . \
  | docker import --change 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
say "imported $IMAGE ($(( $(date +%s) - T0 ))s total)"
