#!/usr/bin/env bash
# Installs the Debian packages the project needs (bubblewrap for the sandbox, Chromium for the
# browser tests) when they are missing. Needs root or sudo; says what to do otherwise.
set -euo pipefail
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if [ "${RDV_SKIP_CHROMIUM:-0}" != 1 ]; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing Debian packages: ${missing[*]}"
if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
  echo "Please install as root: apt-get install -y ${missing[*]}" >&2; exit 1
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
