"""How far the coach goes on one failed check: a nudge, then a pointer, then a fix of the
learner's own line; never the whole solution.

Counted per submission and check: the first question about a failed check gets the nudge, and
the level moves on only when the learner asks again about that same check of that submission
(why did it fail, a hint, still stuck). A concept or a line question never moves it; a new
submission starts afresh. "Still stuck" asked first goes straight to the pointer; asking for the
answer outright moves one level on, and says why. Past the fix the answer says how many times
it was asked, so asking twice never gets the same text.
"""

from __future__ import annotations

from typing import Literal

Level = Literal["nudge", "pointer", "fix"]
LEVELS: tuple[Level, ...] = ("nudge", "pointer", "fix")


def steps_for(asked_before: int, *, still_stuck: bool = False, wants_answer: bool = False) -> int:
    """How many levels on this question is: its earlier questions about the same check of the
    same submission, one more for "give me the answer", at least one for "still stuck"."""
    step = asked_before + (1 if wants_answer else 0)
    return max(step, 1) if still_stuck else step


def level_for(asked_before: int, *, still_stuck: bool = False, wants_answer: bool = False) -> Level:
    step = steps_for(asked_before, still_stuck=still_stuck, wants_answer=wants_answer)
    return LEVELS[min(step, len(LEVELS) - 1)]


def asks_about(asked: list[str], check_id: str) -> int:
    """Earlier questions about `check_id` (each names the check it was about)."""
    return sum(1 for about in asked if about == check_id)
