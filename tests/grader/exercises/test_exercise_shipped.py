"""Every exercise of every lesson file ships a solution that passes and a starter that fails,
through the CLI (`python -m grader grade --exercise ID FILE --json`), in the bwrap sandbox.

The exercises are read from lessons/*/lesson.yaml, so a new exercise is covered without editing
this file; ddp-fundamentals/train is graded by tests/grader/test_cli.py, which also asserts its
sampler artifact and the CLI's text report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from grader.exercises import LESSONS_DIR, exercise_dir

ROOT = Path(__file__).resolve().parents[3]
GRADED_ELSEWHERE = {"ddp-fundamentals/train"}


def exercise_ids() -> list[str]:
    ids = []
    for path in sorted(LESSONS_DIR.glob("*/lesson.yaml")):
        lesson = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
        ids += [f"{lesson['id']}/{ex['id']}" for ex in lesson.get("exercises") or []]
    return ids


SHIPPED = [ex for ex in exercise_ids() if ex not in GRADED_ELSEWHERE]
CASES = [(ex, kind) for ex in SHIPPED for kind in ("solution", "starter")]


def test_every_lesson_exercise_is_graded_by_a_shipped_file_test() -> None:
    assert "ddp-fundamentals/accumulate" in SHIPPED and "ddp-fundamentals/evaluate" in SHIPPED
    assert set(exercise_ids()) >= GRADED_ELSEWHERE


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize(("exercise", "kind"), CASES, ids=[f"{e}:{k}" for e, k in CASES])
def test_cli_grades_shipped_file(exercise: str, kind: str) -> None:
    folder = exercise_dir(exercise)
    assert folder is not None, f"{exercise} has no exercises/ folder"
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
