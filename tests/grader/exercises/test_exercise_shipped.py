"""Every shipped solution of the lesson 1, 3 and 4 exercises passes and its starter fails,
through the CLI (`python -m grader grade --exercise ID FILE --json`), in the bwrap sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = {
    "data-vs-model-parallelism/allreduce-by-hand": "01-data-vs-model-parallelism",
    "syncbn-sharded-state/syncbn": "03-syncbn-sharded-state",
    "syncbn-sharded-state/zero-checkpoint": "03-syncbn-sharded-state",
    "torchrun-launch/env-launch": "04-torchrun-launch",
    "torchrun-launch/elastic-resume": "04-torchrun-launch",
}
CASES = [(ex, kind) for ex in SHIPPED for kind in ("solution", "starter")]


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize(("exercise", "kind"), CASES, ids=[f"{e}:{k}" for e, k in CASES])
def test_cli_grades_shipped_file(exercise: str, kind: str) -> None:
    folder = ROOT / "lessons" / SHIPPED[exercise] / "exercises" / exercise.split("/")[1]
    path = folder / f"{kind}.py"
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "grade", "--exercise", exercise, str(path), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    result = json.loads(proc.stdout)
    summary = "\n".join(f"{c['status']} {c['id']}: {c['message']}" for c in result["checks"])
    if kind == "solution":
        assert (proc.returncode, result["status"]) == (0, "pass"), summary + str(result["error"])
    else:
        assert (proc.returncode, result["status"]) == (1, "fail"), summary + str(result["error"])
        assert any(c["status"] == "fail" and c["hint"] for c in result["checks"])
