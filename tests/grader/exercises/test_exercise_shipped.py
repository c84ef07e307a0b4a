"""Every graded exercise's shipped solution passes and its starter fails, through the CLI
(`python -m grader grade --exercise ID FILE --json`), in the bwrap sandbox, cold, with the ranks
forked from the supervisor (torch imported once per launch, as the golden suites grade: see
tests/grader/conftest.py). test_cli.py grades lesson 2's files through the CLI with spawned ranks,
and test_warm_fidelity.py holds forked, spawned and warm ranks to the same view."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.exercises import exercise_dir, graded_exercises

ROOT = Path(__file__).resolve().parents[3]
# Every exercise with a grading block; lesson 2's first one is graded the same way by test_cli.py.
SHIPPED = [e for e in graded_exercises() if e != "ddp-fundamentals/train"]
CASES = [(ex, kind) for ex in SHIPPED for kind in ("solution", "starter")]


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize(("exercise", "kind"), CASES, ids=[f"{e}:{k}" for e, k in CASES])
def test_cli_grades_shipped_file(exercise: str, kind: str) -> None:
    folder = exercise_dir(exercise)
    assert folder is not None, f"{exercise} has no exercises/ folder beside its lesson file"
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
