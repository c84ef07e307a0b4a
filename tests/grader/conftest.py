"""Fixtures shared by the grader's test modules."""

from __future__ import annotations

import pytest

from grader.launcher import FORK_ENV


@pytest.fixture
def forked_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grade with the ranks forked from the supervisor (RDV_FORK_RANKS=1).

    The golden, red-team and exercise-golden suites grade ~180 programs this way: torch is
    imported once per launch instead of once per process, about a third less CPU on a 2-core box,
    which keeps `make test` inside CI's time. Spawned ranks, the production default, judge the
    same way: test_golden.py grades a few cases both ways, and the CLI, shipped-solution,
    containment and submission tests all spawn. Forked ranks reseed their generators (an
    exercise case that never broadcasts its initial weights fails only if they do).
    """
    monkeypatch.setenv(FORK_ENV, "1")
