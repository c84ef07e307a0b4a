"""Fixtures shared by the grader's test modules."""

from __future__ import annotations

import pytest

from grader import warm
from grader.launcher import FORK_ENV


@pytest.fixture
def warm_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grade as production does: every launch in a warm sandbox of the pool, each rank a spare
    interpreter started ahead (grader.spares), whatever the machine's default pool size.

    The golden, red-team and exercise-golden suites grade ~200 programs this way. Cold launches
    judge the same: test_golden.py and test_warm_fidelity.py grade a sample both ways (the
    whole of them: `python -m benchmarks warm_fidelity`).
    """
    monkeypatch.setenv(FORK_ENV, "0")
    monkeypatch.setenv(warm.POOL_ENV, "2")
