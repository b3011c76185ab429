#!/usr/bin/env bash
# Build the offline root filesystem agentenvs/mariadb-rootfs:<suite> (Debian's
# mariadb-server) the same way as the base: debootstrap (its default mirror) into a temp
# dir, then `docker import`, labelled with a hash of the suite and package list. Nothing
# can be installed during `docker build --network none`, hence a separate rootfs rather
# than a Dockerfile on the base. Skips the work when the image is present with that
# label unless --force is given. Usage: build_mariadb_image.sh [--force] [SUITE]
set -euo pipefail

FORCE=0
if [ "${1:-}" = "--force" ]; then FORCE=1; shift; fi
HOST_SUITE=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
SUITE=${1:-${HOST_SUITE:-bookworm}}
IMAGE=${AGENTENVS_MARIADB_ROOTFS_IMAGE:-agentenvs/mariadb-rootfs:$SUITE}
# the server and its client tools (mariadb-install-db, mariadb-admin ping)
INCLUDE=bash,coreutils,mariadb-server,mariadb-client
LABEL_KEY=org.agentenvs.base-packages
WANT_HASH=$(printf '%s\n%s\n' "$SUITE" "$INCLUDE" | sha256sum | cut -c1-16)

say() { echo "build_mariadb_image.sh: $*" >&2; }

HAVE_HASH=$(docker image inspect -f "{{index .Config.Labels \"$LABEL_KEY\"}}" "$IMAGE" \
  2>/dev/null || true)
if [ "$FORCE" = 0 ] && [ "$HAVE_HASH" = "$WANT_HASH" ]; then
  say "$IMAGE present (packages $WANT_HASH); nothing to do"
  exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq debootstrap >/dev/null
fi

T0=$(date +%s)
ROOTFS=$(mktemp -d /tmp/agentenvs-mariadb-rootfs.XXXXXX)
trap 'rm -rf "$ROOTFS" "$ROOTFS.log"' EXIT
say "debootstrap $SUITE (minbase + $INCLUDE) into $ROOTFS"
# policy-rc.d is not in place during debootstrap, but its chroot has no init to start
# services with, so the package's postinst leaves the server stopped
debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOTFS" \
  >"$ROOTFS.log" 2>&1 || { tail -n 30 "$ROOTFS.log" >&2; exit 1; }
say "debootstrap done ($(( $(date +%s) - T0 ))s)"

# a smaller image: package caches and docs are not needed at run time; the data dir the
# package made is dropped too, so the container's entrypoint initializes a fresh one
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
  "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/* \
  "$ROOTFS"/var/lib/mysql/* "$ROOTFS"/run/mysqld/*

tar -C "$ROOTFS" --numeric-owner -c . \
  | docker import --change 'CMD ["/bin/bash"]' --change "LABEL $LABEL_KEY=$WANT_HASH" \
    - "$IMAGE" >/dev/null
say "imported $IMAGE ($(( $(date +%s) - T0 ))s total)"
