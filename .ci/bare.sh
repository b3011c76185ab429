#!/usr/bin/env bash
# CI: the README's `make test` and `make demo` on a bare Debian that has only python3,
# python3-venv, git, make and ca-certificates, with no service and nothing installed by hand.
#
# Builds (or takes from the cache) a debootstrap'ed root of the host's Debian suite, clones
# this repository's HEAD into it, enters it with a pivot_root in fresh mount and pid
# namespaces (not a chroot: the kernel refuses the local sandbox's user namespace to a
# chrooted process) that share the host's network, and runs `make demo` first on the fresh
# clone (its install phase timed apart from the demo, and the size of that light .venv, so
# the log shows the README's figures), then `make install` (the full set, into the same
# .venv), a check that the local sandbox works there, and `make test` with the extras that
# need no torch. MySQL and Docker tests skip with their reasons (AGENTENVS_REQUIRE_SERVICES
# is unset inside). Exits non-zero, with the tail of the output, when any step fails. Prints
# the time of each phase.
#
# Usage: bash .ci/bare.sh [--rebuild] [PYTEST_ARGS...]
#   --rebuild     debootstrap afresh even when the cached root is there
# Environment:
#   AGENTENVS_BARE_CACHE     where the root tarball is cached (default /var/cache/agentenvs;
#                            empty: no cache); a cached root older than
#   AGENTENVS_BARE_MAX_AGE_D days (default 14) is built again
#   AGENTENVS_BARE_EXTRAS    the extras `make` installs (default: every extra but hf and
#                            integrations, which pull torch)
#   AGENTENVS_BARE_TIMEOUT_S wall limit of the run inside the root (default 2700)
#   AGENTENVS_BARE_KEEP=1    keep the work dir (root and logs) for a look afterwards
#   AGENTENVS_BARE_PASSED=FILE  write there the ids of the tests that passed inside (one per
#                            line, see tests/conftest.py), for a later run to leave out
set -euo pipefail

# ------------------------------------------------------------------ inside the namespaces
# `bare.sh __enter ROOT CMD...` runs as pid 1 of a new pid namespace, in a private mount
# namespace: it mounts /proc, /dev and /sys into ROOT, makes ROOT the root with pivot_root,
# detaches the old root (so nothing of the host stays visible) and runs CMD with a clean
# environment. Every process left inside dies with this pid 1.
if [ "${1:-}" = "__enter" ]; then
  R=$2
  shift 2
  mount --make-rprivate /
  mount --bind "$R" "$R"
  mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
  mount --rbind /dev "$R/dev"
  # shared memory of its own, gone with the namespace
  mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$R/dev/shm"
  mount --rbind /sys "$R/sys"
  mount -o remount,bind,ro "$R/sys"
  mkdir -p "$R/.old-root"
  cd "$R"
  pivot_root . .old-root
  cd /
  umount -l /.old-root
  rmdir /.old-root
  exec "$@"
fi

# ------------------------------------------------------------------------------ host side
REBUILD=0
if [ "${1:-}" = "--rebuild" ]; then REBUILD=1; shift; fi
PYTEST_ARGS="$*"

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
HOST_SUITE=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
SUITE=${HOST_SUITE:-bookworm}
# the whole package list of the bare machine (debootstrap's minbase adds Debian's
# required packages: an init-less base with apt, coreutils, mount)
PACKAGES=python3,python3-venv,git,make,ca-certificates
EXTRAS=${AGENTENVS_BARE_EXTRAS:-test,plot,mysql,docker,ray,parquet,intercode,server,ors,bfcl}
CACHE=${AGENTENVS_BARE_CACHE-/var/cache/agentenvs}
MAX_AGE_D=${AGENTENVS_BARE_MAX_AGE_D:-14}
TIMEOUT_S=${AGENTENVS_BARE_TIMEOUT_S:-2700}
KEY=$(printf '%s\n%s\n' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-16)
TARBALL=${CACHE:+$CACHE/bare-root-$SUITE-$KEY.tar}

say() { echo "bare.sh: $*" >&2; }
now() { date +%s; }
T_ALL=$(now)

# mounts and namespaces need root; unshare and pivot_root are util-linux's
if [ "$(id -u)" != 0 ]; then say "FAILED: needs root (debootstrap, mount namespaces)"; exit 1; fi
for tool in unshare pivot_root git tar; do
  command -v "$tool" >/dev/null 2>&1 || { say "FAILED: $tool is not on PATH"; exit 1; }
done

WORK=$(mktemp -d /tmp/agentenvs-bare.XXXXXX)
ROOTFS=$WORK/root
LOG=$WORK/run.log
INNER_PID=

cleanup() {
  local rc=$?
  if [ -n "$INNER_PID" ] && kill -0 "$INNER_PID" 2>/dev/null; then
    kill -TERM "$INNER_PID" 2>/dev/null || true
    wait "$INNER_PID" 2>/dev/null || true
  fi
  # The mounts live in the namespace that died with its pid 1; a mount under the root that
  # the host can see would mean otherwise, and rm must never walk into it.
  if grep -q " ${WORK}/" /proc/self/mountinfo; then
    say "mounts left under $WORK: detaching them"
    grep " ${WORK}/" /proc/self/mountinfo | awk '{print $5}' | sort -r \
      | while read -r m; do umount -l "$m" || true; done
  fi
  if [ "${AGENTENVS_BARE_KEEP:-0}" = 1 ]; then
    say "kept $WORK"
  elif ! grep -q " ${WORK}/" /proc/self/mountinfo; then
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
  say "FAILED: $1"
  if [ -s "$LOG" ]; then
    say "last lines of the output:"
    tail -n "${2:-60}" "$LOG" >&2
  fi
  exit 1
}

need_debootstrap() {
  command -v debootstrap >/dev/null 2>&1 && return
  say "installing debootstrap"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq debootstrap >/dev/null
}

# ---------------------------------------------------------------- the root: cache or build
T0=$(now)
mkdir -p "$ROOTFS"
fresh_cache() {
  [ -n "$TARBALL" ] && [ -f "$TARBALL" ] && [ "$REBUILD" = 0 ] \
    && [ -n "$(find "$TARBALL" -mtime "-$MAX_AGE_D" 2>/dev/null)" ]
}
if fresh_cache; then
  say "root from the cache ($TARBALL)"
  tar -C "$ROOTFS" --numeric-owner -xf "$TARBALL" || fail "cannot unpack $TARBALL"
else
  need_debootstrap
  say "debootstrap $SUITE (minbase + $PACKAGES)"
  # debootstrap's default mirror, as the sandbox images use
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" >"$LOG" 2>&1 \
    || fail "debootstrap $SUITE" 30
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
  if [ -n "$TARBALL" ]; then
    mkdir -p "$CACHE"
    tar -C "$ROOTFS" --numeric-owner -cf "$TARBALL.tmp.$$" . && mv "$TARBALL.tmp.$$" "$TARBALL" \
      || { rm -f "$TARBALL.tmp.$$"; say "could not cache the root (going on)"; }
    # roots of an older package list or suite are of no further use
    find "$CACHE" -maxdepth 1 -name 'bare-root-*.tar' ! -path "$TARBALL" -delete 2>/dev/null || true
  fi
fi
T_ROOT=$(( $(now) - T0 ))
say "root ready (${T_ROOT}s)"

# What the bare machine would get from the network it sits on: name resolution and the
# trust store (a network that re-signs TLS puts its CA there; the host's variables that
# point tools at a CA file are passed on with the file).
cp -L /etc/resolv.conf "$ROOTFS/etc/resolv.conf" 2>/dev/null || true
[ -f /etc/hosts ] && cp -L /etc/hosts "$ROOTFS/etc/hosts"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp -L /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
fi
PASS_ENV=()
for v in PIP_CERT SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO; do
  f=${!v:-}
  [ -n "$f" ] && [ -f "$f" ] || continue
  mkdir -p "$ROOTFS$(dirname "$f")"
  [ -e "$ROOTFS$f" ] || cp -L "$f" "$ROOTFS$f"
  PASS_ENV+=("$v=$f")
done
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY CI; do
  [ -n "${!v:-}" ] && PASS_ENV+=("$v=${!v}")
done
PASSED_OUT=${AGENTENVS_BARE_PASSED:-}
[ -n "$PASSED_OUT" ] && PASS_ENV+=("AGENTENVS_PASSED_LOG=/src/passed.txt")

# -------------------------------------------------------------------- a clean clone of HEAD
T0=$(now)
git clone --quiet --no-hardlinks "$REPO" "$ROOTFS/src/agentenvs" || fail "git clone $REPO"
HEAD=$(git -C "$ROOTFS/src/agentenvs" rev-parse --short HEAD)
say "cloned $HEAD into the root ($(( $(now) - T0 ))s)"

# ----------------------------------------------------------------------- the run inside
# One script, run as root inside the bare machine: make demo (its install, then the demo),
# make install, the local sandbox check, make test (the README's two commands). Phase
# times go to a file the host reads afterwards.
cat >"$ROOTFS/src/run-bare.sh" <<EOF
set -eu
cd /src/agentenvs
t0=\$(date +%s)
echo "== make demo: its install (the light set)"
make install-light
t1=\$(date +%s)
size=\$(du -sh .venv | cut -f1)
echo "light_install \$((t1 - t0))" >>/src/phases
echo "light_size \$size" >>/src/phases
echo "make demo: install \$((t1 - t0)) s, .venv \$size"
echo "== make demo"
make demo
t0=\$(date +%s)
echo "demo \$((t0 - t1))" >>/src/phases
echo "== make install (EXTRAS=$EXTRAS)"
make install EXTRAS='$EXTRAS'
t1=\$(date +%s)
echo "install \$((t1 - t0))" >>/src/phases
case ",$EXTRAS," in  # the full set stands for the light one when it holds plot
  *,plot,*) if make -n demo | grep -q 'pip install'; then
      echo "make demo would install again after make install" >&2
      exit 1
    fi ;;
esac
echo "== the local sandbox"
.venv/bin/python - <<'PY'
import sys
from agentenvs.sandbox import make_sandbox
from agentenvs.sandbox.local import local_available
ok, why = local_available()
print("local sandbox:", why)
if not ok:
    sys.exit("the local sandbox does not work on the bare machine")
box = make_sandbox("local")
try:
    res = box.run("echo sandboxed \$((6*7))", timeout=30)
    if res.returncode != 0 or res.stdout.strip() != "sandboxed 42":
        sys.exit(f"the local sandbox ran a command wrongly: {res}")
    print("local sandbox ran a command:", res.stdout.strip())
finally:
    box.close()
PY
echo "== make test $PYTEST_ARGS"
make test EXTRAS='$EXTRAS' PYTEST_ARGS='$PYTEST_ARGS'
echo "tests \$((\$(date +%s) - t1))" >>/src/phases
EOF

say "running make demo + make install + make test inside (log $LOG; limit ${TIMEOUT_S}s)"
T0=$(now)
set +e
# --kill-child: if this script is killed, the pid namespace (and all in it) goes with it
timeout --kill-after=30 "$TIMEOUT_S" \
  unshare --mount --pid --fork --kill-child --propagation private \
  bash "$HERE/bare.sh" __enter "$ROOTFS" \
  /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 TERM=dumb PYTHONUNBUFFERED=1 "${PASS_ENV[@]}" \
  /bin/bash /src/run-bare.sh >"$LOG" 2>&1 &
INNER_PID=$!
tail -n +1 -f "$LOG" --pid="$INNER_PID" 2>/dev/null &
TAIL_PID=$!
wait "$INNER_PID"
RC=$?
INNER_PID=
wait "$TAIL_PID" 2>/dev/null
set -e
T_END=$(now)

phase() { awk -v k="$1" '$1 == k {print $2}' "$ROOTFS/src/phases" 2>/dev/null; }
say "times: root ${T_ROOT}s, make demo's install $(phase light_install)s" \
  "(.venv $(phase light_size)), the demo $(phase demo)s, make install $(phase install)s," \
  "sandbox check + make test $(phase tests)s, all $(( T_END - T_ALL ))s"
case $RC in
  0) ;;
  124|137) fail "the run inside the bare root passed its limit of ${TIMEOUT_S}s" ;;
  *) fail "the run inside the bare root exited $RC" ;;
esac
if [ -n "$PASSED_OUT" ]; then
  cp "$ROOTFS/src/passed.txt" "$PASSED_OUT" || fail "no list of passed tests at /src/passed.txt"
  say "$(wc -l <"$PASSED_OUT") passed tests listed in $PASSED_OUT"
fi
say "passed (HEAD $HEAD; the skips above are the services' and the torch extras')"
