"""Sync against real databases: duplicates, reordering, two offline devices, cursors."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.content import service as content
from app.learning import service
from app.learning.models import ProgressEvent
from app.learning.schemas import ProgressEventIn
from tests.auth.factories import create_user

LESSON = "ddp-fundamentals"
T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
_events = TypeAdapter(list[ProgressEventIn])


def steps() -> list[str]:
    return [step.id for step in content.localized_lesson(LESSON).steps]


def quiz() -> list[tuple[str, list[str]]]:
    lesson = content.localized_lesson(LESSON)
    return [(q.id, [c.id for c in q.choices]) for q in lesson.quiz]


def ev(event_id: str, kind: str, seconds: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": event_id,
        "type": kind,
        "lesson_id": LESSON,
        "at": (T0 + timedelta(seconds=seconds)).isoformat(),
        **fields,
    }


def sync(session: Session, user_id: Any, events: list[dict[str, Any]], since: int | None = None):
    return service.sync(session, user_id, _events.validate_python(events), since=since)


def lesson_state(result: Any) -> dict[str, Any]:
    state = result.lessons[LESSON].model_dump()
    state.pop("updated_at"), state.pop("version")
    return state


def test_duplicates_and_retries_change_nothing(session: Session) -> None:
    user = create_user(session)
    s = steps()
    batch = [ev("a1", "step_completed", 1, step_id=s[0]), ev("a2", "position", 2, step_id=s[1])]
    first = sync(session, user.id, batch)
    again = sync(session, user.id, batch + batch, since=first.cursor)
    assert again.lessons == {}  # nothing changed since the cursor
    assert again.cursor == first.cursor
    count = session.scalar(
        select(func.count()).select_from(ProgressEvent).where(ProgressEvent.user_id == user.id)
    )
    assert count == 2
    # A retry with the same id but different content is the same event: the first copy stays.
    changed = [ev("a2", "position", 99, step_id=s[3])]
    assert sync(session, user.id, changed, since=first.cursor).lessons == {}
    assert sync(session, user.id, []).lessons[LESSON].last_step == s[1]


def test_any_order_gives_the_same_state(session: Session) -> None:
    s = steps()
    questions = quiz()
    (q1, choices1), (q2, choices2) = questions[0], questions[1]
    events = [
        ev("e1", "step_completed", 1, step_id=s[0]),
        ev("e2", "position", 5, step_id=s[2]),
        ev("e3", "position", 5, step_id=s[1]),  # same time as e2: the id decides
        ev("e4", "step_seen", 3, step_id=s[3]),
        ev("e5", "quiz_answered", 4, question_id=q1, choice=choices1[0]),
        ev("e6", "quiz_answered", 6, question_id=q1, choice=choices1[1]),
        ev("e7", "quiz_completed", 7, score=2, max_score=3),
        ev("e8", "quiz_completed", 8, score=1, max_score=3),
        ev("e9", "quiz_answered", 2, question_id=q2, choice=choices2[-1]),
    ]
    states = []
    rng = random.Random(7)
    for _ in range(4):
        user = create_user(session)
        order = events[:]
        rng.shuffle(order)
        # Deliver in random chunks, some events twice.
        cut = rng.randrange(1, len(order))
        sync(session, user.id, order[:cut])
        sync(session, user.id, order[cut - 1 :] + order[:2])
        states.append(lesson_state(sync(session, user.id, [])))
    assert all(state == states[0] for state in states)
    final = states[0]
    assert final["last_step"] == s[1]  # ("e3" > "e2") at the same time
    assert final["quiz"]["best_score"] == 2
    assert final["quiz"]["answers"][q1]["choice"] == choices1[1]


def test_two_offline_devices_converge(session: Session) -> None:
    """Phone and laptop record overlapping work offline, then sync in either order."""
    s = steps()
    phone = [
        ev("phone-1", "step_completed", 10, step_id=s[0]),
        ev("phone-2", "step_completed", 20, step_id=s[1]),
        ev("phone-3", "position", 30, step_id=s[2]),
    ]
    laptop = [
        ev("laptop-1", "step_completed", 15, step_id=s[1]),
        ev("laptop-2", "step_completed", 25, step_id=s[4]),
        ev("laptop-3", "position", 40, step_id=s[5]),
        ev("laptop-4", "quiz_completed", 41, score=3, max_score=3),
    ]
    finals = []
    for first, second in ((phone, laptop), (laptop, phone)):
        user = create_user(session)
        a = sync(session, user.id, first)
        b = sync(session, user.id, second, since=a.cursor)
        # The first device catches up with what changed since its cursor.
        caught_up = service.changes_since(session, user.id, a.cursor)
        assert lesson_state(caught_up) == lesson_state(b)
        finals.append(lesson_state(b))
    assert finals[0] == finals[1]
    assert finals[0]["completed_steps"] == sorted({s[0], s[1], s[4]})
    assert finals[0]["last_step"] == s[5]
    assert finals[0]["quiz"]["best_score"] == 3


def test_cursor_returns_only_lessons_changed_since(session: Session) -> None:
    user = create_user(session)
    s = steps()
    empty = service.changes_since(session, user.id, None)
    assert empty.lessons == {} and empty.cursor == 0
    one = sync(session, user.id, [ev("c1", "step_completed", 1, step_id=s[0])])
    assert set(one.lessons) == {LESSON}
    assert service.changes_since(session, user.id, one.cursor).lessons == {}
    two = sync(session, user.id, [ev("c2", "step_completed", 2, step_id=s[1])], since=one.cursor)
    assert two.cursor > one.cursor
    assert two.lessons[LESSON].completed_steps == sorted([s[0], s[1]])
    # An event that changes nothing (already completed) does not move the cursor.
    same = sync(session, user.id, [ev("c3", "step_completed", 3, step_id=s[0])], since=two.cursor)
    assert same.lessons == {} and same.cursor == two.cursor
    # A cursor from another history (e.g. a restored database) gets the full state.
    assert set(service.changes_since(session, user.id, two.cursor + 1000).lessons) == {LESSON}


def test_unknown_content_is_rejected_per_event_and_not_stored(session: Session) -> None:
    user = create_user(session)
    s = steps()
    (question, choices) = quiz()[0]
    result = sync(
        session,
        user.id,
        [
            ev("ok", "step_completed", 1, step_id=s[0]),
            {**ev("bad-lesson", "position", 1, step_id=s[0]), "lesson_id": "no-such-lesson"},
            ev("bad-step", "position", 1, step_id="no-such-step"),
            ev("bad-question", "quiz_answered", 1, question_id="nope", choice=choices[0]),
            ev("bad-choice", "quiz_answered", 1, question_id=question, choice="zz"),
        ],
    )
    assert {r.id: r.code for r in result.rejected} == {
        "bad-lesson": "unknown_lesson",
        "bad-step": "unknown_step",
        "bad-question": "unknown_question",
        "bad-choice": "unknown_choice",
    }
    assert result.lessons[LESSON].completed_steps == [s[0]]
    stored = session.scalars(
        select(ProgressEvent.client_id).where(ProgressEvent.user_id == user.id)
    ).all()
    assert stored == ["ok"]


def test_quiz_answers_are_graded_by_the_server(session: Session) -> None:
    user = create_user(session)
    lesson = content.get_catalog().lessons[LESSON].lesson
    question = lesson.quiz[0]
    wrong = next(c.id for c in question.choices if c.id != question.answer)
    result = sync(
        session,
        user.id,
        [
            ev("q1", "quiz_answered", 1, question_id=question.id, choice=wrong),
            ev("q2", "quiz_answered", 2, question_id=question.id, choice=question.answer),
            ev("q3", "quiz_answered", 3, question_id=question.id, choice=wrong),
        ],
    )
    quiz_state = result.lessons[LESSON].quiz
    assert quiz_state.answers[question.id].choice == wrong
    assert quiz_state.answers[question.id].correct is False
    assert quiz_state.correct_questions == [question.id]  # once right, it counts


def test_future_timestamps_are_clamped(session: Session) -> None:
    user = create_user(session)
    s = steps()
    far = datetime.now(UTC) + timedelta(days=365)
    sync(session, user.id, [{**ev("f1", "position", 0, step_id=s[3]), "at": far.isoformat()}])
    later = datetime.now(UTC) + timedelta(minutes=1)
    result = sync(
        session, user.id, [{**ev("f2", "position", 0, step_id=s[4]), "at": later.isoformat()}]
    )
    assert result.lessons[LESSON].last_step == s[4]  # the skewed clock did not pin s[3]


def test_record_exercise_result_shows_in_progress(session: Session) -> None:
    user = create_user(session)
    before = service.changes_since(session, user.id, None).cursor
    for status, passed in (("fail", 5), ("pass", 12), ("error", 0)):
        service.record_exercise_result(session, user.id, f"{LESSON}/train", status, passed, 12)
    result = service.changes_since(session, user.id, before)
    entry = result.lessons[LESSON].exercises[f"{LESSON}/train"]
    assert (entry.attempts, entry.passed, entry.best_passed_checks) == (3, True, 12)
    assert entry.last_status == "error"
    assert result.cursor == before + 3


def test_learners_do_not_see_each_others_events(session: Session) -> None:
    alice, bob = create_user(session), create_user(session)
    s = steps()
    sync(session, alice.id, [ev("same-id", "step_completed", 1, step_id=s[0])])
    bob_result = sync(session, bob.id, [ev("same-id", "step_completed", 1, step_id=s[1])])
    assert bob_result.lessons[LESSON].completed_steps == [s[1]]
    assert service.changes_since(session, alice.id, None).lessons[LESSON].completed_steps == [s[0]]
