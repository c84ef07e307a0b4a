"""Where a learner stands in each lesson (the course page's counts and next step): the pure
rules, and `service.course_standing` over a real database."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import TypeAdapter
from sqlalchemy.orm import Session

from app.learning import service
from app.learning.merge import StoredEvent, apply_events, apply_exercise_result, empty_state
from app.learning.schemas import ProgressEventIn
from app.learning.standing import lesson_standing
from tests.auth.factories import create_user
from tests.content.conftest import FIXTURE_LESSONS, use_lessons

__all__ = ["use_lessons"]

AT = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
CONTENT: dict[str, Any] = {
    "lesson_id": "l",
    "step_ids": ["a", "b", "c"],
    "question_ids": ["q1", "q2"],
    "exercise_slugs": ["ex"],
}


def state_after(*events: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    stored = [
        StoredEvent(f"e{i}", kind, "l", AT, payload) for i, (kind, payload) in enumerate(events)
    ]
    return apply_events(empty_state(), stored)


def test_nothing_recorded_is_new_and_starts_at_step_one() -> None:
    standing = lesson_standing(None, **CONTENT)
    assert standing.status == "new"
    assert (standing.steps_done, standing.steps_total) == (0, 3)
    assert (standing.quiz_correct, standing.quiz_total) == (0, 2)
    assert (standing.exercises_passed, standing.exercises_total) == (0, 1)
    assert standing.next_step == 1


def test_only_looking_at_a_step_is_not_starting() -> None:
    """Opening a lesson records a position; that alone keeps the lesson's Start link."""
    standing = lesson_standing(state_after(("position", {"step_id": "b"})), **CONTENT)
    assert standing.status == "new"


def test_next_is_the_first_step_not_completed_then_quiz_then_exercise() -> None:
    steps_a_c = state_after(
        ("step_completed", {"step_id": "a"}), ("step_completed", {"step_id": "c"})
    )
    standing = lesson_standing(steps_a_c, **CONTENT)
    assert standing.status == "in_progress"
    assert (standing.steps_done, standing.next_step) == (2, 2)

    all_steps = state_after(*[("step_completed", {"step_id": s}) for s in "abc"])
    wrong_q1 = state_after(
        *[("step_completed", {"step_id": s}) for s in "abc"],
        ("quiz_answered", {"question_id": "q1", "choice": "x", "correct": False}),
        ("quiz_answered", {"question_id": "q2", "choice": "y", "correct": True}),
    )
    assert lesson_standing(all_steps, **CONTENT).next_question == "q1"
    standing = lesson_standing(wrong_q1, **CONTENT)
    assert (standing.next_step, standing.next_question, standing.quiz_correct) == (None, "q1", 1)

    quiz_done = state_after(
        *[("step_completed", {"step_id": s}) for s in "abc"],
        *[
            ("quiz_answered", {"question_id": q, "choice": "y", "correct": True})
            for q in CONTENT["question_ids"]
        ],
    )
    failed = apply_exercise_result(
        quiz_done, exercise_id="l/ex", status="fail", passed_checks=1, total_checks=3, at=AT
    )
    standing = lesson_standing(failed, **CONTENT)
    assert (standing.status, standing.next_question, standing.next_exercise) == (
        "in_progress",
        None,
        "ex",
    )
    passed = apply_exercise_result(
        failed, exercise_id="l/ex", status="pass", passed_checks=3, total_checks=3, at=AT
    )
    standing = lesson_standing(passed, **CONTENT)
    assert standing.status == "done"
    assert (standing.steps_done, standing.quiz_correct, standing.exercises_passed) == (3, 2, 1)


def test_only_current_content_counts() -> None:
    """A step removed from the lesson file no longer counts; a new one is simply not done."""
    old = state_after(("step_completed", {"step_id": "gone"}), ("step_completed", {"step_id": "a"}))
    standing = lesson_standing(old, **CONTENT)
    assert (standing.steps_done, standing.next_step) == (1, 2)


def test_course_standing_reads_the_learner_s_progress(session: Session, use_lessons: Any) -> None:
    use_lessons(FIXTURE_LESSONS)
    learner, other = create_user(session), create_user(session)
    events = TypeAdapter(list[ProgressEventIn]).validate_python(
        [
            {"id": "s1", "type": "step_completed", "lesson_id": "first-steps", "step_id": "hello",
             "at": AT.isoformat()},
            {"id": "q1", "type": "quiz_answered", "lesson_id": "second-lesson",
             "question_id": "count", "choice": "b", "at": AT.isoformat()},
        ]
    )  # fmt: skip
    service.sync(session, learner.id, events)
    service.record_exercise_result(session, learner.id, "second-lesson/hello", "pass", 1, 1)

    standings = service.course_standing(session, learner.id)
    assert set(standings) == {"first-steps", "second-lesson"}
    first, second = standings["first-steps"], standings["second-lesson"]
    assert (first.status, first.steps_done, first.steps_total, first.next_step) == (
        "in_progress",
        1,
        2,
        2,
    )
    assert (second.steps_done, second.quiz_correct, second.exercises_passed) == (0, 1, 1)
    assert second.next_step == 1
    assert {s.status for s in service.course_standing(session, other.id).values()} == {"new"}


@pytest.mark.parametrize("choice", ["a", "b"])
def test_a_quiz_answer_alone_starts_the_lesson(choice: str) -> None:
    state = state_after(
        ("quiz_answered", {"question_id": "q1", "choice": choice, "correct": choice == "b"})
    )
    assert lesson_standing(state, **CONTENT).status == "in_progress"
