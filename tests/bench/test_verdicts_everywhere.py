"""The pure parts of `python -m benchmarks verdicts_everywhere` (its runs are api_verdicts')."""

from __future__ import annotations

import pytest

from benchmarks import verdicts_everywhere as ve
from benchmarks._learner import Verdict
from benchmarks.api_verdicts import LESSON2, Bench, Measured, Options


def bench(verdicts: dict[str, list[float | None]], bare: list[float], hint: bool) -> Bench:
    made = Bench(Options(1, 0, (4,), (), None, hint, 0), [], [], [])
    made.bare = bare
    for exercise, seconds in verdicts.items():
        made.runs[(exercise, 0)] = Measured(
            [Verdict("id", 0.1, s, "done", "pass" if s else None) for s in seconds],
            [1.0] * len(seconds),
        )
    return made


def test_the_slowest_exercise_is_named_against_the_runs_own_baseline() -> None:
    run = bench({LESSON2: [1.0, 1.2, 0.8], "a/hang": [6.0], "b/env": [4.0]}, [5.0, 4.0, 6.0], True)
    assert ve.worst(run) == ("a/hang", pytest.approx(1.2), 1.0)
    assert ve.lesson2(run) == (pytest.approx(0.2), 1.0)


def test_an_exercise_without_a_verdict_is_the_slowest() -> None:
    run = bench({LESSON2: [1.0], "a/lost": [None]}, [5.0], False)
    assert ve.worst(run)[:2] == ("a/lost", float("inf"))


def test_the_summary_says_met_or_not() -> None:
    assert ve.verdict(True) == "met" and ve.verdict(False) == "NOT met"
