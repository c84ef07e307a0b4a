#!/usr/bin/env bash
# Rebuilds the editor bundle from static/editor-src (pinned package.json + package-lock.json) in a
# temporary directory and checks that it matches the committed static/vendor/codemirror.js.
# `make editor` rebuilds the committed bundle after a change to editor-src.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$root/static/editor-src/package.json" "$root/static/editor-src/package-lock.json" "$work/"
cp -r "$root/static/editor-src/src" "$work/src"
mkdir -p "$work/out"
(cd "$work" && npm ci --no-audit --no-fund --loglevel=error >/dev/null && OUT_DIR="$work/out" npm run --silent build >/dev/null 2>&1)
if ! cmp -s "$work/out/codemirror.js" "$root/static/vendor/codemirror.js"; then
  echo "static/vendor/codemirror.js does not match a fresh build of static/editor-src." >&2
  echo "Run 'make editor' and commit the result." >&2
  exit 1
fi
echo "editor bundle matches its sources"
