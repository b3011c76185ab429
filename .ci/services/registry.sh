#!/usr/bin/env bash
# Start a local image registry on loopback (Debian's docker-registry: the Distribution
# registry server) and push the images built offline to it under official names (Docker Hub
# python, debian, ubuntu and the t-bench python-3-13 and ubuntu-24-04 images), so the
# online path (an image pulled by name) runs for real with no internet. Idempotent; seconds.
#
# The registry listens on 127.0.0.1:${REGISTRY_PORT:-5000} with no auth and its storage in
# a temp dir. Docker treats 127.0.0.0/8 registries as insecure-allowed (plain HTTP), so
# names like 127.0.0.1:5000/library/python:3.13-slim pull with no daemon option. Plain
# Docker Hub names (python:3.13-slim) resolve to it through the engine's mirror, which
# docker.sh starts dockerd with (--registry-mirror=http://127.0.0.1:5000); run this before
# the first pull. The engine mirrors only Docker Hub: a ghcr.io/org/img:tag name is pulled
# by the project as 127.0.0.1:5000/ghcr.io/org/img:tag when AGENTENVS_REGISTRY names this
# registry, so push such images under that path. What is pushed is a stand-in: the offline
# Debian base re-tagged, not the real python image.
# Prints the registry's address. Stop it with `kill "$(cat /tmp/agentenvs-registry.pid)"`.
set -euo pipefail
PORT=${REGISTRY_PORT:-5000}
ADDR=127.0.0.1:$PORT
PIDFILE=/tmp/agentenvs-registry.pid
say() { echo "registry.sh: $*" >&2; }
T0=$(date +%s)
up() { curl -fsS "http://$ADDR/v2/" >/dev/null 2>&1; }

if ! command -v docker-registry >/dev/null 2>&1; then
  say "installing docker-registry"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq docker-registry >/dev/null 2>&1 \
    || { apt-get update -qq; apt-get install -y -qq docker-registry >/dev/null; }
fi
if ! up; then
  DIR=$(mktemp -d /tmp/agentenvs-registry.XXXXXX)
  cat >"$DIR/config.yml" <<CFG
version: 0.1
storage:
  filesystem:
    rootdirectory: $DIR/data
  delete:
    enabled: true
http:
  addr: $ADDR
CFG
  (cd / && exec setsid nohup docker-registry serve "$DIR/config.yml" \
    </dev/null >"$DIR/registry.log" 2>&1 & echo $! >"$PIDFILE")
  for _ in $(seq 1 30); do up && break; sleep 0.5; done
  up || { say "the registry did not answer; log:"; tail -n 20 "$DIR/registry.log" >&2; exit 1; }
fi
# the offline stand-ins under official names (a stand-in: Debian 13's Python 3.13)
# and under the t-bench names the published sets use most (their layers are the same)
for pair in "agentenvs/tb-python:3.13 library/python:3.13-slim" \
            "agentenvs/tb-debian:13 library/debian:trixie" \
            "agentenvs/tb-debian:13 library/ubuntu:24.04" \
            "agentenvs/tb-python:3.13 ghcr.io/laude-institute/t-bench/python-3-13:20250620" \
            "agentenvs/tb-debian:13 ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624"; do
  set -- $pair
  if docker image inspect "$1" >/dev/null 2>&1; then
    docker tag "$1" "$ADDR/$2" && docker push -q "$ADDR/$2" >/dev/null
  fi
done
say "up at $ADDR ($(( $(date +%s) - T0 ))s)"
echo "$ADDR"
