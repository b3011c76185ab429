#!/usr/bin/env bash
# Start a local Docker engine and build the sandbox images offline (idempotent).
#
# Installs Debian's docker.io when dockerd is missing, starts dockerd in the background
# (no bridge, no iptables: sandbox containers run with --network none anyway) unless an
# engine already answers, waits until it does, then builds agentenvs/base:<suite> with
# debootstrap + `docker import` and agentenvs/python:latest and agentenvs/terminal:latest
# on top of it, skipping images that are up to date. Prints timings to stderr. Stop the engine with
# `kill "$(cat /var/run/docker.pid)"`.
#
# The engine it starts takes the loopback registry of registry.sh (127.0.0.1:$REGISTRY_PORT,
# default 5000) as its Docker Hub mirror, so a task's `FROM python:3.13-slim` pulls from it
# as written. The mirror needs not be up when the engine starts (it is asked at each pull of
# a Docker Hub name); start registry.sh before the first pull. An engine that already
# answers is used as it is (its mirrors unchanged).
set -euo pipefail

# A daemon must not hold the caller's pipes (fds above 2 inherited from whoever runs this
# script), or a caller that reads our output to EOF would wait for the daemon to exit.
close_inherited_fds() {
  local fd
  for fd in /proc/$BASHPID/fd/*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}


ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WAIT_S=${DOCKER_WAIT_S:-60}
MIRROR=127.0.0.1:${REGISTRY_PORT:-5000}
LOG=${DOCKERD_LOG:-/tmp/agentenvs-dockerd.log}
T0=$(date +%s)

say() { echo "docker.sh: $*" >&2; }
elapsed() { echo "$(( $(date +%s) - T0 ))s"; }
ping_engine() { docker info >/dev/null 2>&1; }

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
  say "installing docker.io"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
  say "docker.io installed ($(elapsed))"
fi

if ! ping_engine; then
  say "starting dockerd (log: $LOG)"
  # a stale pid file from a killed engine stops a new one from starting
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
  fi
  (close_inherited_fds; cd / && exec setsid nohup dockerd --storage-driver=overlay2 --iptables=false --ip6tables=false \
    --bridge=none --registry-mirror="http://$MIRROR" --insecure-registry="$MIRROR" </dev/null >"$LOG" 2>&1 &)
  for _ in $(seq 1 "$WAIT_S"); do
    ping_engine && break
    sleep 1
  done
  if ! ping_engine; then
    say "engine did not answer within ${WAIT_S}s; last lines of $LOG:"
    tail -n 20 "$LOG" >&2 || true
    exit 1
  fi
  say "engine up ($(elapsed))"
fi

bash "$ROOT/sandboxes/build_images.sh"
# the wheels the official test bootstraps install at test time (one pip download, seconds);
# a throwaway venv gives pip where the system python3 has none
WH_PY=${PYTHON:-}
if [ -z "$WH_PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then WH_PY=$ROOT/.venv/bin/python
  elif python3 -m pip --version >/dev/null 2>&1; then WH_PY=python3
  else
    WH_VENV=$(mktemp -d /tmp/agentenvs-wheelhouse-venv.XXXXXX)
    python3 -m venv "$WH_VENV" && WH_PY=$WH_VENV/bin/python
  fi
fi
PYTHON=$WH_PY bash "$ROOT/sandboxes/build_wheelhouse.sh"
[ -z "${WH_VENV:-}" ] || rm -rf "$WH_VENV"
say "ready ($(elapsed))"
