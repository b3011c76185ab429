#!/usr/bin/env bash
# Build the offline base image agentenvs/base:<suite> from Debian packages (no registry).
#
# debootstrap (its default mirror) installs a minimal Debian with the packages below into a
# temp dir, which `docker import` turns into an image labelled with a hash of the suite and
# package list. Skips the work when the image is present with that label (so changing the
# list rebuilds it) unless --force is given. Usage: build_base_image.sh [--force] [SUITE]
# (SUITE defaults to the host's Debian codename, else bookworm).
set -euo pipefail

FORCE=0
if [ "${1:-}" = "--force" ]; then FORCE=1; shift; fi
HOST_SUITE=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
SUITE=${1:-${HOST_SUITE:-bookworm}}
IMAGE=${AGENTENVS_BASE_IMAGE:-agentenvs/base:$SUITE}
# what the sandboxes use: python3 for programs and the test-case worker, coreutils'
# `timeout`, tar for file transfers, procps for inspecting processes; the terminal tasks
# add the shell tools, git, pytest (run-tests.sh runs offline) and the sqlite3 shell;
# numpy and pandas are there because DeepCoder's official checker preloads them.
# Essential packages are listed too so that the list says what the image promises.
# AGENTENVS_BASE_PACKAGES replaces the list (the Terminal-Bench images add their tools).
INCLUDE=${AGENTENVS_BASE_PACKAGES:-bash,coreutils,findutils,grep,sed,mawk,tar,gzip,procps,git,python3,python3-pytest,python3-numpy,python3-pandas,sqlite3,ca-certificates}
LABEL_KEY=org.agentenvs.base-packages
WANT_HASH=$(printf '%s\n%s\n' "$SUITE" "$INCLUDE" | sha256sum | cut -c1-16)

say() { echo "build_base_image.sh: $*" >&2; }

HAVE_HASH=$(docker image inspect -f "{{index .Config.Labels \"$LABEL_KEY\"}}" "$IMAGE" \
  2>/dev/null || true)
if [ "$FORCE" = 0 ] && [ "$HAVE_HASH" = "$WANT_HASH" ]; then
  say "$IMAGE present (packages $WANT_HASH); nothing to do"
  exit 0
fi
if [ -n "$HAVE_HASH" ] && [ "$HAVE_HASH" != "$WANT_HASH" ]; then
  say "$IMAGE has packages ${HAVE_HASH:-<unlabelled>}, want $WANT_HASH: rebuilding"
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
  | docker import --change 'CMD ["/bin/bash"]' --change "LABEL $LABEL_KEY=$WANT_HASH" \
    - "$IMAGE" >/dev/null
say "imported $IMAGE ($(( $(date +%s) - T0 ))s total)"
