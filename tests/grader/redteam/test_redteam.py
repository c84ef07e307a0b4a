"""Red-team cases for ddp-fundamentals/train, graded through the real sandbox: programs written to
break the grader, each with a `why` in its `expected.json` (layout and runner:
tests/grader/golden.py).

A correct program must pass with every check `pass` or `skip`; a wrong one must fail with at
least the listed checks failing, and no learner program may ever get `error`.
"""

from __future__ import annotations

import pytest

from grader.sandbox.pool import Pool
from tests.grader.golden import REDTEAM, assert_graded_as_expected

BY_NAME = {case.name: case for case in REDTEAM.cases()}


def test_cases_are_well_formed() -> None:
    assert len(BY_NAME) >= 40
    for name, case in BY_NAME.items():
        exp = case.expected
        assert exp.why, name
        assert (exp.status == "fail") == bool(exp.failing), name


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_redteam_case(name: str, production_launch: Pool) -> None:  # tests/grader/conftest.py
    assert_graded_as_expected(BY_NAME[name], production_launch)
