"""Fixtures shared by the grader's test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grader.sandbox.pool import Pool

# Prepared sandboxes each test process keeps for the suites that grade as production does: one is
# readied (its supervisor and spare ranks importing torch) while the previous case is judged.
SUITE_POOL_SIZE = 1


@pytest.fixture(scope="session")
def suite_pool() -> Iterator[Pool]:
    """The test process's warm pool (one per xdist worker), owned by the session as a server or a
    worker owns its own: kept from one case to the next, closed at the end."""
    with Pool(SUITE_POOL_SIZE) as pool:
        yield pool


@pytest.fixture
def production_launch(suite_pool: Pool) -> Pool:
    """Grade as production does: pass this pool to `grade`. A launch takes a prepared sandbox from
    it, each rank a spare interpreter that torch's agent is handed through inside/rank_shim.py (a
    rank no spare can serve starts cold, as a spawned interpreter). The golden, red-team and
    exercise-golden suites grade ~200 programs this way."""
    return suite_pool
