"""Golden cases of every exercise but ddp-fundamentals/train, graded in the real sandbox (bwrap):
tests/grader/exercises/<exercise>/<case>/ (layout, `expected.json` and runner:
tests/grader/golden.py)."""

from __future__ import annotations

import pytest

from grader.sandbox.pool import Pool
from tests.grader.golden import EXERCISES, assert_graded_as_expected

BY_NAME = {case.name: case for case in EXERCISES.cases()}


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_golden(name: str, production_launch: Pool) -> None:  # tests/grader/conftest.py
    assert_graded_as_expected(BY_NAME[name], production_launch)
