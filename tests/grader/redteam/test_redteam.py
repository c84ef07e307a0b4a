"""Red-team cases for ddp-fundamentals/train, graded through the real sandbox.

Each folder holds a learner program `main.py` and `expected.json`:
{"status": "pass" | "fail", "failing": [check ids that must fail],
 "why": "one sentence",
 "may_also_fail": [check ids allowed to fail as well (optional)],
 "passing": [check ids that must pass, not merely be skipped (optional)],
 "message_contains": [substrings every listed failing check's message must hold (optional)],
 "not_judged": [check ids that must be skipped as not reached, the run having stopped early
                (optional)],
 "spec": {partial ExerciseSpec overrides, e.g. {"limits": {"wall_seconds": 30}} (optional)}}

A correct program must pass with every check `pass` or `skip`; a wrong one must fail with at
least the listed checks failing, and no learner program may ever get `error`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grader.api import grade
from grader.contract import ExerciseSpec, Job, Result
from grader.exercises import load_spec
from tests.grader.golden import TEST_LIMITS

HERE = Path(__file__).parent
EXERCISE = "ddp-fundamentals/train"
CASES = sorted(p.name for p in HERE.iterdir() if (p / "expected.json").is_file())


def _expected(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / name / "expected.json").read_text())
    return data


def _spec(name: str) -> ExerciseSpec:
    base = load_spec(EXERCISE).model_dump()
    # One world size keeps the suite short (a passing program is launched once, not once per
    # size); cases whose bug only shows at another size set their own `launch.world_sizes`.
    base["launch"]["world_sizes"] = [2]
    base["limits"].update(TEST_LIMITS)  # a hang fails after 10 s, not the lesson's 30
    for key, value in _expected(name).get("spec", {}).items():
        if isinstance(value, dict):
            base[key].update(value)
        else:
            base[key] = value
    return ExerciseSpec.model_validate(base)


def _report(result: Result) -> str:
    lines = [f"status {result.status}: {result.summary}"]
    lines += [f"  {c.status:4} {c.id}: {c.message}" for c in result.checks]
    if result.error:
        lines.append(f"  error: {result.error}")
    return "\n".join(lines)


def test_cases_are_well_formed() -> None:
    assert len(CASES) >= 40
    for name in CASES:
        exp = _expected(name)
        assert exp["status"] in ("pass", "fail"), name
        assert exp.get("why"), name
        assert (exp["status"] == "fail") == bool(exp["failing"]), name
        assert (HERE / name / "main.py").is_file(), name
        assert not set(exp.get("passing", [])) & set(exp["failing"]), name


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.usefixtures("forked_ranks")
@pytest.mark.parametrize("name", CASES)
def test_redteam_case(name: str) -> None:
    exp = _expected(name)
    job = Job(
        exercise=EXERCISE,
        code=(HERE / name / "main.py").read_text(),
        spec=_spec(name),
        submission_id=f"redteam-{name}",
    )
    result = grade(job)
    report = _report(result)
    assert result.status != "error", report  # a learner program never makes the platform fail
    assert result.status == exp["status"], report
    failing = {c.id for c in result.checks if c.status == "fail"}
    must = set(exp["failing"])
    may = set(exp.get("may_also_fail", []))
    assert must <= failing, f"checks {sorted(must - failing)} did not fail\n{report}"
    assert not failing - must - may, f"checks {sorted(failing - must - may)} failed too\n{report}"
    passing = {c.id for c in result.checks if c.status == "pass"}
    must_pass = set(exp.get("passing", []))
    assert must_pass <= passing, f"checks {sorted(must_pass - passing)} did not pass\n{report}"
    for c in result.checks:
        if c.status == "fail":  # a failure the learner can act on: what happened, and a hint
            assert c.message and c.hint, report
        if c.id in exp.get("not_judged", []):
            assert c.status == "skip" and c.message.startswith("Not judged"), report
        if c.id in must:
            for text in exp.get("message_contains", []):
                assert text in c.message, f"{c.id}: {text!r} not in its message\n{report}"
