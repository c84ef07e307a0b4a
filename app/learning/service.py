"""Progress and its offline-first sync; quiz answers. No FastAPI here.

A sync stores each new event once, merges the new ones into the lesson's state (see merge.py for
the rules), and answers with the lessons changed since the client's cursor. Every change bumps
the learner's cursor; a learner's writers are serialised on the cursor row, so cursors are handed
out in commit order and `since` never skips a change.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.content import service as content
from app.content.loader import Catalog
from app.db import as_utc
from app.domain_events import Event, Kind, record
from app.learning import repository
from app.learning.merge import (
    LessonState,
    StoredEvent,
    apply_events,
    apply_exercise_result,
    empty_state,
)
from app.learning.models import LessonProgress, ProgressCursor
from app.learning.schemas import (
    LessonProgressPublic,
    ProgressEventIn,
    ProgressState,
    QuizAnsweredEvent,
    QuizCompletedEvent,
    RejectedEvent,
    StepEvent,
)
from app.learning.standing import LessonStanding, lesson_standing

# A device whose clock runs ahead must not pin its "last position" forever.
MAX_CLOCK_SKEW = timedelta(minutes=5)


# Before this, a time is a device's broken clock (or a hostile client), not a learner's action.
EARLIEST_TIME = datetime(2000, 1, 1, tzinfo=UTC)


def _stored(event: ProgressEventIn, now: datetime) -> StoredEvent | RejectedEvent:
    at = event.at if event.at.tzinfo else event.at.replace(tzinfo=UTC)
    if at < EARLIEST_TIME:  # compared before converting: 0001-01-01+14:00 has no UTC time
        return RejectedEvent(
            id=event.id,
            code="invalid_time",
            message=f"The time {event.at.isoformat()} is before 2000; fix the device's clock "
            "and send the event again with a new id.",
        )
    if isinstance(event, QuizCompletedEvent) and event.score > event.max_score:
        return RejectedEvent(
            id=event.id,
            code="invalid_score",
            message=f"The score {event.score} is above the maximum {event.max_score}; "
            "drop this event.",
        )
    at = now if at > now + MAX_CLOCK_SKEW else at.astimezone(UTC)
    if isinstance(event, StepEvent):
        payload: dict[str, object] = {"step_id": event.step_id}
    elif isinstance(event, QuizAnsweredEvent):
        payload = {"question_id": event.question_id, "choice": event.choice}
    else:
        payload = {"score": event.score, "max_score": event.max_score}
    return StoredEvent(event.id, event.type, event.lesson_id, at, payload)


def _validate(event: StoredEvent, catalog: Catalog) -> RejectedEvent | StoredEvent:
    """Check the event names content that exists; quiz answers get their `correct` here."""
    loaded = catalog.lessons.get(event.lesson_id)
    if loaded is None:
        if event.lesson_id in catalog.unavailable:
            return event  # listed but its file is broken right now: keep the learner's progress
        return RejectedEvent(
            id=event.client_id,
            code="unknown_lesson",
            message=f"There is no lesson {event.lesson_id!r}; drop this event.",
        )
    lesson = loaded.lesson
    if event.type in ("step_seen", "step_completed", "position"):
        step_id = event.payload["step_id"]
        if all(step.id != step_id for step in lesson.steps):
            return RejectedEvent(
                id=event.client_id,
                code="unknown_step",
                message=f"Lesson {lesson.id!r} has no step {step_id!r}; drop this event.",
            )
    if event.type == "quiz_answered":
        question_id = event.payload["question_id"]
        question = next((q for q in lesson.quiz if q.id == question_id), None)
        if question is None:
            return RejectedEvent(
                id=event.client_id,
                code="unknown_question",
                message=f"Lesson {lesson.id!r} has no question {question_id!r}; drop this event.",
            )
        choice = event.payload["choice"]
        if all(option.id != choice for option in question.choices):
            return RejectedEvent(
                id=event.client_id,
                code="unknown_choice",
                message=f"Question {question_id!r} has no choice {choice!r}; drop this event.",
            )
        payload = {**event.payload, "correct": choice == question.answer}
        return StoredEvent(event.client_id, event.type, event.lesson_id, event.at, payload)
    return event


def sync(
    session: Session,
    user_id: uuid.UUID,
    events: Sequence[ProgressEventIn],
    since: int | None = None,
    locale: str | None = None,
) -> ProgressState:
    """Store the new events, merge them, and answer with what changed since `since`.
    `locale`: the interface language they were sent in (kept for the instructors' analytics)."""
    rejected, version = _store_and_merge(session, user_id, events, locale)
    state = changes_since(session, user_id, since, version=version)
    state.rejected = rejected
    return state


def store_and_merge(
    session: Session,
    user_id: uuid.UUID,
    events: Sequence[ProgressEventIn],
    locale: str | None = None,
) -> list[RejectedEvent]:
    """Store each event not seen before and merge it; returns the events refused."""
    return _store_and_merge(session, user_id, events, locale)[0]


def _store_and_merge(
    session: Session,
    user_id: uuid.UUID,
    events: Sequence[ProgressEventIn],
    locale: str | None = None,
) -> tuple[list[RejectedEvent], int | None]:
    """The events refused, and the learner's cursor when this call locked it (None when nothing
    was new: a batch sent again takes no lock and writes nothing).

    The events are inserted before the cursor is locked, so the lock is held only for the merge
    and the answer; their unique key (learner, client id) alone keeps each one stored once."""
    now = datetime.now(UTC)
    accepted: dict[str, StoredEvent] = {}
    rejected: list[RejectedEvent] = []
    catalog = content.get_catalog()  # once per batch: it checks the lesson files for edits
    for sent in events:
        stored = _stored(sent, now)
        checked = stored if isinstance(stored, RejectedEvent) else _validate(stored, catalog)
        if isinstance(checked, RejectedEvent):
            rejected.append(checked)
        else:
            accepted.setdefault(checked.client_id, checked)  # first copy in a batch wins
    new_ids = repository.insert_new_events(
        session,
        user_id,
        [
            {
                "client_id": e.client_id,
                "type": e.type,
                "lesson_id": e.lesson_id,
                "at": e.at,
                "payload": e.payload,
                "locale": locale,
                "received_at": now,
            }
            for e in accepted.values()
        ],
    )
    if not new_ids:
        return rejected, None
    by_lesson: dict[str, list[StoredEvent]] = defaultdict(list)
    for client_id in new_ids:
        event = accepted[client_id]
        by_lesson[event.lesson_id].append(event)
    lesson_days = {(e.lesson_id, as_utc(e.at).date()) for e in map(accepted.get, new_ids) if e}
    record(session, [Event(Kind.PROGRESS, user_id, lesson, day) for lesson, day in lesson_days])
    cursor = repository.lock_cursor(session, user_id)
    _merge_into_lessons(session, cursor, user_id, by_lesson, now)
    return rejected, cursor.version


def _merge_into_lessons(
    session: Session,
    cursor: ProgressCursor,
    user_id: uuid.UUID,
    by_lesson: dict[str, list[StoredEvent]],
    now: datetime,
) -> None:
    if not by_lesson:
        return
    rows = repository.lessons_for_update(session, user_id, list(by_lesson))
    next_version = cursor.version + 1
    changed = False
    for lesson_id, lesson_events in by_lesson.items():
        row = rows.get(lesson_id)
        before: LessonState = row.state if row is not None else empty_state()
        after = apply_events(before, lesson_events)
        if row is None or after != before:
            repository.save_lesson(
                session,
                row,
                user_id=user_id,
                lesson_id=lesson_id,
                state=after,
                version=next_version,
                now=now,
            )
            changed = True
    if changed:
        cursor.version = next_version
    session.flush()


def changes_since(
    session: Session, user_id: uuid.UUID, since: int | None, *, version: int | None = None
) -> ProgressState:
    """Lessons changed after cursor `since` (all of them if None, or if the cursor is from a
    different history, e.g. a restored database), and the current cursor (`version`: the
    cursor this transaction holds locked, else it is read)."""
    # The cursor is read before the lessons: a change committed in between is sent again next
    # time (harmless) instead of being skipped.
    if version is None:
        version = repository.current_version(session, user_id)
    start = 0 if since is None or since > version else since
    lessons = repository.lessons_changed_since(session, user_id, start)
    return ProgressState(lessons={row.lesson_id: to_public(row) for row in lessons}, cursor=version)


def to_public(row: LessonProgress) -> LessonProgressPublic:
    state = row.state
    quiz = state["quiz"]
    return LessonProgressPublic.model_validate(
        {
            "completed_steps": state["completed_steps"],
            "seen_steps": state["seen_steps"],
            "last_step": state["last_step"],
            "last_position_at": state["last_position_at"],
            "quiz": {
                "answers": {
                    qid: {"choice": a["choice"], "correct": a["correct"], "answered_at": a["at"]}
                    for qid, a in quiz["answers"].items()
                },
                "correct_questions": quiz["correct_questions"],
                "best_score": quiz["best_score"],
                "max_score": quiz["max_score"],
            },
            "exercises": state["exercises"],
            "version": row.version,
            "updated_at": row.updated_at,
        }
    )


def lesson_progress(
    session: Session, user_id: uuid.UUID, lesson_id: str
) -> LessonProgressPublic | None:
    """One lesson's merged progress (for the lesson page), or None if the learner has none."""
    row = repository.get_lesson(session, user_id, lesson_id)
    return to_public(row) if row is not None else None


def saved_quiz_answers(progress: LessonProgressPublic, lesson_id: str) -> dict[str, str]:
    """The learner's latest answer to each question, by question id, for the lesson page: only
    questions the lesson still asks, with a choice it still offers (an edit may drop either)."""
    loaded = content.get_catalog().lessons.get(lesson_id)
    if loaded is None:
        return {}
    offered = {question.id: {c.id for c in question.choices} for question in loaded.lesson.quiz}
    return {
        question_id: answer.choice
        for question_id, answer in progress.quiz.answers.items()
        if answer.choice in offered.get(question_id, ())
    }


def course_standing(session: Session, user_id: uuid.UUID) -> dict[str, LessonStanding]:
    """The learner's standing in every lesson that loads (for the course page), by lesson id."""
    rows = repository.lessons_of_learner(session, user_id)
    standings = {}
    for lesson_id, loaded in content.get_catalog().lessons.items():
        row = rows.get(lesson_id)
        lesson = loaded.lesson
        standings[lesson_id] = lesson_standing(
            row.state if row is not None else None,
            lesson_id=lesson_id,
            step_ids=[step.id for step in lesson.steps],
            question_ids=[question.id for question in lesson.quiz],
            exercise_slugs=[exercise.id for exercise in lesson.exercises],
            cards=lesson.cards(),
        )
    return standings


def record_exercise_result(
    session: Session,
    user_id: uuid.UUID,
    exercise_id: str,
    status: str,
    passed_checks: int,
    total_checks: int,
) -> None:
    """Count a graded attempt at `exercise_id` ("<lesson id>/<exercise id>") and keep the best
    result. Called by submissions when a result is stored, inside its transaction."""
    lesson_id = exercise_id.partition("/")[0]
    now = datetime.now(UTC)
    cursor = repository.lock_cursor(session, user_id)
    row = repository.get_lesson(session, user_id, lesson_id)
    before = row.state if row is not None else empty_state()
    after = apply_exercise_result(
        before,
        exercise_id=exercise_id,
        status=status,
        passed_checks=passed_checks,
        total_checks=total_checks,
        at=now,
    )
    cursor.version += 1
    repository.save_lesson(
        session,
        row,
        user_id=user_id,
        lesson_id=lesson_id,
        state=after,
        version=cursor.version,
        now=now,
    )
    session.flush()


def record_quiz_answer(
    session: Session,
    user_id: uuid.UUID,
    lesson_id: str,
    question_id: str,
    choice: str,
    locale: str | None = None,
) -> list[RejectedEvent]:
    """An answer given on the server (the quiz endpoint) becomes an ordinary synced event."""
    event = QuizAnsweredEvent(
        id=f"srv-{uuid.uuid4().hex}",
        type="quiz_answered",
        lesson_id=lesson_id,
        question_id=question_id,
        choice=choice,
        at=datetime.now(UTC),
    )
    return store_and_merge(session, user_id, [event], locale)
