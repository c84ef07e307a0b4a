"""Where a learner stands in each lesson, for the course page. Pure functions, no database.

A lesson counts as done when every step is completed, every quiz question has been answered
correctly at least once, and every exercise has passed. Only content that exists now counts: a
step removed from the lesson file no longer adds to "done", a new one is simply not done yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.learning.merge import LessonState

Status = Literal["new", "in_progress", "done"]
CardKind = Literal["step", "question", "exercise"]


@dataclass(frozen=True)
class LessonStanding:
    """Counts against the lesson's current content, and the first thing left to do."""

    steps_done: int
    steps_total: int
    quiz_correct: int
    quiz_total: int
    exercises_passed: int
    exercises_total: int
    started: bool
    next_step: int | None  # 1-based index of the first step not completed
    next_question: str | None  # id of the first question not yet answered correctly
    next_exercise: str | None  # slug of the first exercise not yet passed
    # 1-based position, in the lesson's sequence of cards, of the first card left to do (a step
    # not completed, a question not answered correctly, an exercise not passed); None when done.
    next_card: int | None = None
    next_kind: CardKind | None = None
    next_card_id: str | None = None  # that card's step id, question id or exercise slug

    @property
    def done(self) -> bool:
        return self.next_step is None and self.next_question is None and self.next_exercise is None

    @property
    def status(self) -> Status:
        if self.done and self.started:
            return "done"
        return "in_progress" if self.started else "new"


def lesson_standing(
    state: LessonState | None,
    *,
    lesson_id: str,
    step_ids: Sequence[str],
    question_ids: Sequence[str],
    exercise_slugs: Sequence[str],
    cards: Sequence[tuple[CardKind, str]] | None = None,
) -> LessonStanding:
    """The standing in one lesson from its merged state (None: nothing recorded yet).

    `cards` is the lesson's sequence, (kind, id) in the learner's order (default: the steps, the
    questions, then the exercises).
    """
    completed = set(state["completed_steps"]) if state else set()
    quiz = state["quiz"] if state else {"answers": {}, "correct_questions": []}
    correct = set(quiz["correct_questions"])
    exercises = state["exercises"] if state else {}
    passed = {
        slug
        for slug in exercise_slugs
        if exercises.get(f"{lesson_id}/{slug}", {}).get("passed", False)
    }
    # Opening a lesson records a position; only work done (or tried) counts as started.
    started = bool(completed & set(step_ids) or quiz["answers"] or exercises)
    next_step = next((i for i, step in enumerate(step_ids, 1) if step not in completed), None)
    if cards is None:
        cards = [
            *(("step", item) for item in step_ids),
            *(("question", item) for item in question_ids),
            *(("exercise", item) for item in exercise_slugs),
        ]
    left: dict[CardKind, set[str]] = {
        "step": set(step_ids) - completed,
        "question": set(question_ids) - correct,
        "exercise": set(exercise_slugs) - passed,
    }
    next_card, next_kind, next_card_id = next(
        ((i, kind, item) for i, (kind, item) in enumerate(cards, 1) if item in left[kind]),
        (None, None, None),
    )
    return LessonStanding(
        steps_done=sum(step in completed for step in step_ids),
        steps_total=len(step_ids),
        quiz_correct=sum(question in correct for question in question_ids),
        quiz_total=len(question_ids),
        exercises_passed=len(passed),
        exercises_total=len(exercise_slugs),
        started=started,
        next_step=next_step,
        next_question=next((q for q in question_ids if q not in correct), None),
        next_exercise=next((slug for slug in exercise_slugs if slug not in passed), None),
        next_card=next_card,
        next_kind=next_kind,
        next_card_id=next_card_id,
    )
