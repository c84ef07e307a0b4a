#!/usr/bin/env bash
# Starts a Docker engine for `make scale-test` when none answers on $DOCKER_HOST, and stops it
# again only if this script started it. Usage: engine.sh start | stop
#
# The engine keeps its images under fixed paths outside the repository, so images built by one
# run (a developer's, CI's) are reused by the next. It leaves the host's network alone: no
# iptables rules, no IP forwarding, no docker0 bridge (compose makes its own bridge for the
# stack; the sandbox containers have no network at all).
set -euo pipefail
STATE=${RDV_SCALE_STATE:-/var/lib/rendezvous-ci}
RUN=${RDV_SCALE_RUN:-/run/rendezvous-ci}
SOCK=$RUN/docker.sock
PIDFILE=$RUN/dockerd.pid
STARTED=$RUN/started-by-scale-test
export DOCKER_HOST=${DOCKER_HOST:-unix://$SOCK}

answers() { /usr/bin/docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start() {
  if answers; then echo "engine: reusing the one on $DOCKER_HOST"; return; fi
  if [ "$DOCKER_HOST" != "unix://$SOCK" ]; then
    echo "engine: nothing answers on DOCKER_HOST=$DOCKER_HOST" >&2; exit 1
  fi
  command -v dockerd >/dev/null || {
    echo "engine: dockerd missing (apt-get install docker.io docker-compose debootstrap)" >&2
    exit 1
  }
  mkdir -p "$STATE/docker" "$RUN/exec"
  getent group docker >/dev/null || groupadd --system docker
  dockerd --data-root "$STATE/docker" --exec-root "$RUN/exec" --pidfile "$PIDFILE" \
    -H "unix://$SOCK" --group docker --storage-driver=overlay2 \
    --iptables=false --ip6tables=false --ip-forward=false --bridge=none \
    >"$RUN/dockerd.log" 2>&1 &
  for _ in $(seq 60); do answers && break; sleep 1; done
  answers || { echo "engine: dockerd did not answer; see $RUN/dockerd.log" >&2; exit 1; }
  touch "$STARTED"
  echo "engine: started dockerd (pid $(cat "$PIDFILE")) on $DOCKER_HOST"
}

stop() {
  if [ ! -e "$STARTED" ]; then echo "engine: not started by scale-test; left running"; return; fi
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  rm -f "$STARTED"
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  echo "engine: stopped dockerd (pid $pid)"
}

"$@"
