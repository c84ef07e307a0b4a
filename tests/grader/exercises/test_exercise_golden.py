"""Golden cases of the lesson 1, 3 and 4 exercises, graded in the real sandbox (bwrap):
tests/grader/exercises/<exercise>/<case>/ (layout, `expected.json` and runner:
tests/grader/golden.py)."""

from __future__ import annotations

import pytest

from tests.grader.golden import EXERCISES, grade_case, problems, report

BY_NAME = {case.name: case for case in EXERCISES.cases()}


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.usefixtures("forked_ranks")  # tests/grader/conftest.py; the 2-node launch spawns
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_golden(name: str) -> None:
    case = BY_NAME[name]
    result = grade_case(case)
    found = problems(case, result)
    assert not found, f"{name}: {found}\n{report(result)}"
