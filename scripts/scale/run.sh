#!/usr/bin/env bash
# `make scale-test`: a Docker engine (started here only when none answers, and then stopped
# again), the base images (built once per engine), then tests/scale: images from the real
# Dockerfile, the compose stack, grading through the HTTP API, a worker killed, two workers.
# Needs root (dockerd, debootstrap) and Debian's docker.io, docker-compose and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/../.."
export RDV_SCALE_STATE=${RDV_SCALE_STATE:-/var/lib/rendezvous-ci}
export DOCKER_HOST=${DOCKER_HOST:-unix://${RDV_SCALE_RUN:-/run/rendezvous-ci}/docker.sock}
missing=()
for tool in dockerd docker-compose debootstrap; do command -v $tool >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[scale] installing docker.io docker-compose debootstrap (missing: ${missing[*]})"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io docker-compose debootstrap >/dev/null
fi
stage() {  # stage NAME COMMAND...: run and print its time
  local name=$1 t0=$SECONDS
  shift
  echo "[scale] $name ..."
  "$@"
  echo "[scale] $name ok in $((SECONDS - t0)) s"
}
stage engine scripts/scale/engine.sh start
trap 'scripts/scale/engine.sh stop' EXIT
stage base-images scripts/scale/base-images.sh
.venv/bin/python -m tests.scale
