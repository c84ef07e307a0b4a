"""Golden grader cases: tests/grader/cases/<name>/main.py + expected.json.

expected.json: {"status": "pass" | "fail", "failing": [check ids that must fail],
                "may_also_fail": [check ids allowed to fail too (a race decides)],
                "spec": {partial ExerciseSpec overrides, e.g. {"limits": {...}}}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.api import grade
from grader.contract import ExerciseSpec, Job, Result
from grader.exercises import load_spec

CASES = Path(__file__).with_name("cases")
EXERCISE = "ddp-fundamentals/train"
# Faster failure on hangs than the lesson's own limits; the wall clock still covers torch start-up.
TEST_LIMITS = {"pg_timeout_seconds": 10, "wall_seconds": 120}


def case_names() -> list[str]:
    return sorted(p.name for p in CASES.iterdir() if (p / "expected.json").is_file())


def expected(name: str) -> dict[str, Any]:
    return json.loads((CASES / name / "expected.json").read_text())


def spec_for(name: str) -> ExerciseSpec:
    base = load_spec(EXERCISE).model_dump()
    base["limits"].update(TEST_LIMITS)
    # One world size keeps the suite short; cases about world sizes set their own.
    base["launch"]["world_sizes"] = [2]
    for key, value in expected(name).get("spec", {}).items():
        if isinstance(value, dict):
            base[key].update(value)
        else:
            base[key] = value
    return ExerciseSpec.model_validate(base)


def grade_case(name: str, sandbox: str) -> Result:
    job = Job(
        exercise=EXERCISE,
        code=(CASES / name / "main.py").read_text(),
        spec=spec_for(name),
        submission_id=f"golden-{name}",
    )
    return grade(job, sandbox=sandbox)


def mismatch(name: str, result: Result) -> str | None:
    """Why the result does not match the case's expectation, or None."""
    exp = expected(name)
    failing = {c.id for c in result.checks if c.status == "fail"}
    must = set(exp.get("failing", []))
    may = set(exp.get("may_also_fail", []))
    if result.status != exp["status"]:
        return f"status {result.status}, expected {exp['status']}"
    if not must <= failing:
        return f"checks {sorted(must - failing)} did not fail"
    if failing - must - may:
        return f"checks {sorted(failing - must - may)} failed unexpectedly"
    return None
