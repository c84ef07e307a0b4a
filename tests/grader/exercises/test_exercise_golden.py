"""Golden cases of every exercise but ddp-fundamentals/train, graded in the real sandbox (bwrap):
tests/grader/exercises/<exercise>/<case>/ (layout, `expected.json` and runner:
tests/grader/golden.py)."""

from __future__ import annotations

import pytest

from tests.grader.golden import EXERCISES, assert_graded_as_expected

BY_NAME = {case.name: case for case in EXERCISES.cases()}


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.usefixtures("production_launch")  # tests/grader/conftest.py
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_golden(name: str) -> None:
    assert_graded_as_expected(BY_NAME[name])
