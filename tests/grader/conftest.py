"""Fixtures shared by the grader's test modules."""

from __future__ import annotations

import pytest

from grader.launcher import FORK_ENV


@pytest.fixture
def forked_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grade with the ranks forked from the supervisor (RDV_FORK_RANKS=1).

    The golden and red-team suites grade ~135 programs of the lesson-2 exercise this way: torch is
    imported once per launch instead of once per process, about a third less CPU on a 2-core box,
    which keeps `make test` inside CI's time. Spawned ranks, the production default, judge the
    same way: test_golden.py grades a few cases both ways, and the CLI, shipped-solution,
    containment, exercise and submission tests all spawn.
    """
    monkeypatch.setenv(FORK_ENV, "1")
