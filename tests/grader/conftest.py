"""Fixtures shared by the grader's test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grader import warm

# Warm sandboxes each test process keeps for the suites that grade as production does: one is
# readied (its supervisor and spare ranks importing torch) while the previous case grades.
SUITE_POOL = "1"


@pytest.fixture(scope="session")
def _suite_pool() -> Iterator[None]:
    """The test process's warm pool, kept from one case to the next and closed at the end."""
    yield
    warm.close_pool()


@pytest.fixture
def production_launch(_suite_pool: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Grade as production does: a warm sandbox from the pool, each rank a spare interpreter that
    torch's agent is handed through inside/rank_shim.py (a rank no spare can serve starts cold, as a
    spawned interpreter). The golden, red-team and exercise-golden suites grade ~200 programs
    this way. The pool lives for the test process (one per xdist worker), so the next case's
    sandbox starts while one grades; tests/conftest.py turns the pool off for every other test.
    """
    monkeypatch.setenv(warm.POOL_ENV, SUITE_POOL)
