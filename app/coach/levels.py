"""How far the coach goes on one failed check: a nudge, then a pointer, then a fix of the
learner's own line; never the whole solution.

Counted per check: the level moves on with each graded submission of the exercise in which that
check failed, and with each time the learner asks again about it on the same submission ("still
stuck"). Asking for the answer outright moves one level on as well, and says why.
"""

from __future__ import annotations

from typing import Literal

Level = Literal["nudge", "pointer", "fix"]
LEVELS: tuple[Level, ...] = ("nudge", "pointer", "fix")


def level_for(failures: int, asked_before: int, *, wants_answer: bool = False) -> Level:
    """`failures`: graded submissions (this one included) in which the check failed;
    `asked_before`: earlier questions about this check of this submission."""
    step = max(failures, 1) - 1 + asked_before + (1 if wants_answer else 0)
    return LEVELS[min(step, len(LEVELS) - 1)]


def asks_about(asked: list[str | None], check_id: str, first_failed: str | None) -> int:
    """Earlier questions about `check_id`: those that clicked it, and those that clicked nothing
    when it is the check an answer leads with (the first failed one)."""
    return sum(
        1
        for clicked in asked
        if clicked == check_id or (clicked is None and check_id == first_failed)
    )
