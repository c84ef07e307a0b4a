#!/usr/bin/env bash
# `make gpu-check`: the GPU path in one command (python -m grader.gpu_check; README, "The GPU
# check"). On a GPU host: the host's own python3 and torch, the grader's other dependencies from
# the wheels `make gpu-wheels` prepared (.gpu-wheels/, no network needed), no sandbox.
# `make gpu-check CPU=1`: the same table on CPU workers with gloo, in the project's venv (CI).
# The table is written as JSON to $GPU_CHECK_JSON (default gpu-check.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
json=${GPU_CHECK_JSON:-gpu-check.json}
if [ "${CPU:-0}" = 1 ]; then
  exec .venv/bin/python -m grader.gpu_check --cpu --json "$json" "$@"
fi
py=${GPU_PYTHON:-python3}
if ls .gpu-wheels/*.whl >/dev/null 2>&1; then
  site="${TMPDIR:-/tmp}/rdv-gpu-site"
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" .gpu-wheels/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "No .gpu-wheels/ here: using what $py already has (run 'make gpu-wheels' where pip works)."
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -m grader.gpu_check --json "$json" "$@"
