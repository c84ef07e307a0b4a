#!/usr/bin/env bash
# `make gpu-wheels`: downloads, here, the wheels that `make gpu-check` installs on a GPU host with
# no network (Python 3.12 on x86-64, its own torch): each distribution of scripts/gpu/wheels.txt
# at the version requirements.lock pins, into .gpu-wheels/ (ignored by git; it travels with the
# repository, under the 64 MiB that a lent GPU machine takes).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY_VERSION=${GPU_PYTHON_VERSION:-3.12}
out=.gpu-wheels
rm -rf "$out"
mkdir -p "$out"
pins=()
while read -r name; do
  case "$name" in ''|'#'*) continue ;; esac
  pin=$(grep -i "^${name}==" requirements.lock | head -1 | cut -d' ' -f1)
  if [ -z "$pin" ]; then
    echo "scripts/gpu/wheels.txt names $name, which requirements.lock does not pin" >&2
    exit 1
  fi
  pins+=("$pin")
done < scripts/gpu/wheels.txt
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
  manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
  --implementation cp "${platforms[@]}" -d "$out" "${pins[@]}"
ls "$out"
du -sh "$out"
