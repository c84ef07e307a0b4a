"""The instructors' view of where learners struggle: the coach's questions counted per place of
the course (lesson, step, exercise) and per failed check, with the most recent questions.

Learners appear only as pseudonyms: an HMAC of their id under the site's secret key, stable
across the view (the same learner is the same "Learner 3fa2c1" everywhere) and not their name,
address or id. No FastAPI imports.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.coach import repository
from app.coach.models import CoachExchange
from app.coach.schemas import (
    StruggleCheck,
    StrugglePlace,
    StruggleQuestion,
    StruggleReport,
)
from app.content import service as content
from app.content.localized import LocalizedLesson
from app.errors import N_
from app.i18n import translate
from grader.i18n import render

PSEUDONYM_HEX = 6


def pseudonym(user_id: uuid.UUID, secret: str, locale: str) -> str:
    digest = hmac.new(secret.encode(), b"coach-learner:" + user_id.bytes, hashlib.sha256)
    return translate(locale, N_("Learner {code}")).format(code=digest.hexdigest()[:PSEUDONYM_HEX])


def report(
    session: Session,
    *,
    locale: str,
    secret: str,
    lesson_id: str | None = None,
    days: int = 30,
    recent: int = 20,
    now: datetime | None = None,
) -> StruggleReport:
    since = (now or datetime.now(UTC)) - timedelta(days=days)
    rows = repository.asked_in_course(session, since=since, lesson_id=lesson_id)
    return StruggleReport(
        since=since,
        lesson_id=lesson_id,
        questions=len(rows),
        learners=len({row.user_id for row in rows}),
        places=_places(rows, locale),
        checks=_checks(rows, locale),
        recent=[_question(row, secret, locale) for row in rows[:recent]],
    )


def _aware(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes; they were stored in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _lesson(lesson_id: str, locale: str) -> LocalizedLesson | None:
    try:
        return content.localized_lesson(lesson_id, locale)
    except (content.ContentNotFound, content.LessonUnavailable):
        return None  # a lesson removed or broken since: its ids still show


def _places(rows: Sequence[CoachExchange], locale: str) -> list[StrugglePlace]:
    groups: dict[tuple[str, str | None, str | None], list[CoachExchange]] = defaultdict(list)
    for row in rows:
        groups[(row.lesson_id, row.step_id, row.exercise)].append(row)
    lessons: dict[str, LocalizedLesson | None] = {}
    places = []
    for (lesson_id, step_id, exercise), asked in groups.items():
        if lesson_id not in lessons:
            lessons[lesson_id] = _lesson(lesson_id, locale)
        lesson = lessons[lesson_id]
        steps = {step.id: step.title for step in lesson.steps} if lesson else {}
        exercises = {item.id: item.title for item in lesson.exercises} if lesson else {}
        places.append(
            StrugglePlace(
                lesson_id=lesson_id,
                lesson_title=lesson.title if lesson else lesson_id,
                step_id=step_id,
                step_title=steps.get(step_id, step_id) if step_id else None,
                exercise=exercise,
                exercise_title=exercises.get(exercise, exercise) if exercise else None,
                questions=len(asked),
                learners=len({row.user_id for row in asked}),
                last_asked_at=_aware(max(row.created_at for row in asked)),
            )
        )
    return sorted(places, key=lambda place: (-place.questions, -place.last_asked_at.timestamp()))


def _checks(rows: Sequence[CoachExchange], locale: str) -> list[StruggleCheck]:
    asked: Counter[tuple[str, str]] = Counter()
    why: Counter[tuple[str, str]] = Counter()
    learners: dict[tuple[str, str], set[uuid.UUID]] = defaultdict(set)
    titles: dict[str, str] = {}
    for row in rows:
        failed = row.failed_checks or []
        if row.exercise is None or not failed:
            continue
        about = _check_asked_about(row.check_id, failed)
        key = (row.exercise, about["id"])
        asked[key] += 1
        learners[key].add(row.user_id)
        titles.setdefault(about["id"], about.get("title") or about["id"])
        if row.check_id is not None:
            why[(row.exercise, row.check_id)] += 1
    checks = [
        StruggleCheck(
            exercise=exercise,
            check_id=check_id,
            title=render(f"title.{check_id}", titles[check_id], {}, locale),
            questions=count,
            why_questions=why[(exercise, check_id)],
            learners=len(learners[(exercise, check_id)]),
        )
        for (exercise, check_id), count in asked.items()
    ]
    return sorted(checks, key=lambda item: (-item.questions, -item.why_questions, item.check_id))


def _check_asked_about(check_id: str | None, failed: list[dict[str, str]]) -> dict[str, str]:
    """The one failed check a question about a run counts for: the check its "Why did this
    fail?" button named, else the run's first failed check (the one the verdict and the coach
    start with). Counting it under every failed check of the run inflated each check's figure
    by the others' questions (issue 38)."""
    return next((check for check in failed if check["id"] == check_id), failed[0])


def _question(row: CoachExchange, secret: str, locale: str) -> StruggleQuestion:
    english = {check["id"]: check.get("title") or check["id"] for check in row.failed_checks or []}
    check_id = row.check_id
    return StruggleQuestion(
        learner=pseudonym(row.user_id, secret, locale),
        lesson_id=row.lesson_id,
        step_id=row.step_id,
        exercise=row.exercise,
        check_id=check_id,
        check_title=render(f"title.{check_id}", english.get(check_id, check_id), {}, locale)
        if check_id
        else None,
        failed_checks=[check["id"] for check in row.failed_checks or []],
        question=row.question,
        locale=row.locale,
        provider=row.provider,
        asked_at=_aware(row.created_at),
    )
