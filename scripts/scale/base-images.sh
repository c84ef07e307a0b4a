#!/usr/bin/env bash
# Builds the images the stack starts from without any registry: a Debian bookworm root file system
# from the mirror apt already uses (debootstrap), imported as rendezvous-base, and a PostgreSQL
# image on top of it. Each is built once per engine and reused (its tag names its inputs).
set -euo pipefail
cd "$(dirname "$0")"
DOCKER=/usr/bin/docker
BASE=${RDV_BASE_IMAGE:-rendezvous-base:bookworm-1}
POSTGRES=${RDV_POSTGRES_IMAGE:-rendezvous-postgres:15-bookworm-1}
STATE=${RDV_SCALE_STATE:-/var/lib/rendezvous-ci}

has_image() { $DOCKER image inspect "$1" >/dev/null 2>&1; }

mirror() {
  local uri
  uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
  [ -n "$uri" ] || uri=$(grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | head -1 | awk '{print $2}')
  echo "${uri:-http://deb.debian.org/debian}"
}

if ! has_image "$BASE"; then
  rootfs="$STATE/rootfs-bookworm"
  rm -rf "$rootfs"
  echo "base: debootstrap bookworm from $(mirror)"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$rootfs" "$(mirror)" >"$STATE/debootstrap.log" 2>&1 \
    || { tail -20 "$STATE/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | $DOCKER import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["bash"]' - "$BASE" >/dev/null
  rm -rf "$rootfs"
  echo "base: imported $BASE"
fi

if ! has_image "$POSTGRES"; then
  $DOCKER build -q --network host --build-arg "BASE_IMAGE=$BASE" -t "$POSTGRES" postgres >/dev/null
  echo "base: built $POSTGRES"
fi
