"""Fixtures shared by the grader's test modules."""

from __future__ import annotations

import pytest

from grader.launch.plan import FORK_ENV


@pytest.fixture
def forked_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grade cold with the ranks forked from the supervisor (RDV_FORK_RANKS=1).

    The golden, red-team and exercise-golden suites grade ~200 programs this way: torch is
    imported once per launch instead of once per process, which keeps `make test` inside CI's
    time on a 2-core box. Graded warm (the production default: spare ranks in pre-started
    sandboxes) the suites judged alike where they were run that way, but cost more on 2 cores
    (each test process's pool refilling beside the gradings). Production's paths are held to
    the same verdicts by samples: test_golden.py grades a few cases warm, test_warm_fidelity.py
    a few more cold and warm, and the containment suite runs warm. Forked ranks reseed their
    generators (an exercise case that never broadcasts its initial weights fails only if they
    do).
    """
    monkeypatch.setenv(FORK_ENV, "1")
