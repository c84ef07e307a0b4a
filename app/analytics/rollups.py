"""Keeping the analytics rollups (`app.analytics.models`) in step with their source rows.

Each rollup row is recomputed from the source rows of its learner, item and day by one
INSERT ... SELECT (the same SELECT that `rebuild` runs over every row, so what is kept
incrementally and what a backfill makes cannot differ), when the analytics consumer applies a
domain event (`app.analytics.consumer`): new progress events (`refresh_events`), a new
submission and a graded one (`refresh_attempts`), a draft saved on a new day or deleted
(`refresh_draft`), an account deleted (`forget_learner`); each refresh then replaces the
learner's contributions to the counters the report reads (`app.analytics.counts`). A refresh
reads only committed source rows and replaces what it summarises, so applying an event twice,
or late, leaves the same rows. The consumer holds the learner's partition, so one learner's
refreshes run one after the other.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Date,
    Select,
    Table,
    case,
    cast,
    delete,
    func,
    insert,
    literal_column,
    select,
    union_all,
)
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.analytics import counts
from app.analytics.models import (
    ALL,
    AnswerDay,
    AttemptDay,
    CheckDay,
    DayCount,
    DraftDay,
    PassCount,
    StepDay,
)
from app.domain_events import partition_of
from app.learning.models import ProgressEvent
from app.submissions.models import Draft, Submission

STEP_TYPES = ("step_seen", "step_completed", "position")
EVENT_TYPES = (*STEP_TYPES, "quiz_answered")  # the progress events the rollups count
JUDGED = ("pass", "fail")

ROLLUPS = (StepDay, AnswerDay, AttemptDay, CheckDay, DraftDay)
TABLES = tuple(model.__tablename__ for model in (*ROLLUPS, DayCount, PassCount))

Bind = Session | Connection
Keys = tuple[Any, ...]
T = TypeVar("T")


def utc_day(column: Any, dialect: str) -> Any:
    """The UTC calendar day of a timestamp column, as a date."""
    if dialect == "postgresql":
        return cast(func.timezone("UTC", column), Date)
    return func.date(column)  # SQLite keeps UTC text: 'YYYY-MM-DD HH:MM:SS...'


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), UTC)


def _both(build: Any, locale: Any) -> Any:
    """The rows under the source row's own locale ('' when unknown), and under ALL. `build`
    gets the locale to select and the keys to group by (none for ALL: PostgreSQL refuses a
    constant in GROUP BY)."""
    own = func.coalesce(locale, "")
    return union_all(build(own, (own,)), build(literal_column(f"'{ALL}'"), ()))


def step_source(dialect: str, *where: ColumnElement[bool]) -> Any:
    event = ProgressEvent
    step_id = event.payload["step_id"].as_string()
    day = utc_day(event.at, dialect)
    completed = func.max(case((event.type == "step_completed", 1), else_=0))

    def build(locale: Any, keys: Keys) -> Select[Any]:
        return (
            select(event.lesson_id, locale, step_id, event.user_id, day, completed)
            .where(event.type.in_(STEP_TYPES), step_id.is_not(None), *where)
            .group_by(event.lesson_id, *keys, step_id, event.user_id, day)
        )

    return _both(build, event.locale)


def answer_source(dialect: str, *where: ColumnElement[bool]) -> Any:
    event = ProgressEvent
    question_id = event.payload["question_id"].as_string()
    choice = event.payload["choice"].as_string()
    correct = event.payload["correct"].as_boolean()
    day = utc_day(event.at, dialect)

    def build(locale: Any, keys: Keys) -> Select[Any]:
        return (
            select(
                event.lesson_id,
                locale,
                question_id,
                choice,
                event.user_id,
                day,
                func.min(event.at),
                func.min(case((correct, event.at))),
            )
            .where(
                event.type == "quiz_answered",
                question_id.is_not(None),
                choice.is_not(None),
                *where,
            )
            .group_by(event.lesson_id, *keys, question_id, choice, event.user_id, day)
        )

    return _both(build, event.locale)


def attempt_source(dialect: str, *where: ColumnElement[bool]) -> Any:
    """Per (exercise, locale, learner, day); the rank of a submission is the number of judged
    ones of that day up to it, in (created_at, id) order."""
    sub = Submission
    day = utc_day(sub.created_at, dialect)

    def build(locale: Any, keys: Keys) -> Select[Any]:
        judged = case((sub.verdict.in_(JUDGED), 1), else_=0)
        ranked = (
            select(
                sub.exercise,
                *[key.label("locale") for key in keys],
                sub.user_id,
                day.label("day"),
                sub.verdict,
                sub.created_at,
                judged.label("judged"),
                func.sum(judged)
                .over(
                    partition_by=(sub.exercise, *keys, sub.user_id, day),
                    order_by=(sub.created_at, sub.id),
                    rows=(None, 0),
                )
                .label("rank"),
            )
            .where(*where)
            .subquery()
        )
        passed = ranked.c.verdict == "pass"
        group = [ranked.c.exercise, ranked.c.user_id, ranked.c.day]
        if keys:  # else the locale is ALL, a constant
            group.append(ranked.c.locale)
        return select(
            ranked.c.exercise,
            ranked.c.locale if keys else locale,
            ranked.c.user_id,
            ranked.c.day,
            func.count(),
            func.sum(ranked.c.judged),
            func.sum(case((ranked.c.verdict == "fail", 1), else_=0)),
            func.min(case((passed, ranked.c.rank))),
            func.min(ranked.c.created_at),
            func.min(case((passed, ranked.c.created_at))),
        ).group_by(*group)

    return _both(build, sub.locale)


def check_source(dialect: str, *where: ColumnElement[bool]) -> Any:
    sub = Submission
    check_id = func.coalesce(sub.first_failed_check, "")
    day = utc_day(sub.created_at, dialect)

    def build(locale: Any, keys: Keys) -> Select[Any]:
        return (
            select(sub.exercise, locale, check_id, sub.user_id, day, func.count())
            .where(sub.verdict == "fail", *where)
            .group_by(sub.exercise, *keys, check_id, sub.user_id, day)
        )

    return _both(build, sub.locale)


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


def _fill(bind: Bind, model: Any, source: Any) -> None:
    table = _table(model)
    bind.execute(insert(table).from_select([c.name for c in table.columns], source))


def _dialect(bind: Bind) -> str:
    return bind.get_bind().dialect.name if isinstance(bind, Session) else bind.dialect.name


def _replace_day(
    session: Session,
    model: Any,
    source: Callable[..., Any],
    day: date,
    rows: tuple[Any, ...],
    picked: tuple[Any, ...],
    at: Any,
) -> None:
    """One learner's rows of `model` for one item and `day` (`rows`: which), recomputed from
    `source` restricted to the same item and learner (`picked`) and to that day of `at`."""
    session.execute(delete(_table(model)).where(*rows, model.day == day))
    between = (at >= day_start(day), at < day_start(day + timedelta(days=1)))
    _fill(session, model, source(_dialect(session), *picked, *between))


def refresh_events(
    session: Session, user_id: uuid.UUID, lesson_days: Iterable[tuple[str, date]]
) -> None:
    """Recompute the learner's step and answer rows of these (lesson, day)s, and their
    contributions to the lessons' counters."""
    lessons = sorted({lesson_id for lesson_id, _ in lesson_days})
    before = {lesson_id: counts.of_lesson(session, user_id, lesson_id) for lesson_id in lessons}
    for lesson_id, day in sorted(set(lesson_days)):
        for model, source in ((StepDay, step_source), (AnswerDay, answer_source)):
            _replace_day(
                session,
                model,
                source,
                day,
                (model.lesson_id == lesson_id, model.user_id == user_id),
                (ProgressEvent.lesson_id == lesson_id, ProgressEvent.user_id == user_id),
                ProgressEvent.at,
            )
    for lesson_id in lessons:
        after = counts.of_lesson(session, user_id, lesson_id)
        counts.apply(session, lesson_id, before[lesson_id], after, partition_of(user_id))


def refresh_attempts(session: Session, user_id: uuid.UUID, exercise: str, day: date) -> None:
    """Recompute the learner's attempt and check rows of this exercise and day, and their
    contributions to the exercise's counters."""
    before = counts.of_exercise(session, user_id, exercise)
    for model, source in ((AttemptDay, attempt_source), (CheckDay, check_source)):
        _replace_day(
            session,
            model,
            source,
            day,
            (model.exercise == exercise, model.user_id == user_id),
            (Submission.exercise == exercise, Submission.user_id == user_id),
            Submission.created_at,
        )
    refreshed = counts.of_exercise(session, user_id, exercise)
    counts.apply(session, counts.lesson_of(exercise), before, refreshed, partition_of(user_id))


def refresh_draft(session: Session, user_id: uuid.UUID, exercise: str) -> None:
    """The learner's draft of the exercise as it is now (a draft opens the exercise on the day
    it was last saved; none: deleted), and the exercise counters it moves."""
    before = counts.of_exercise(session, user_id, exercise)
    mine = (DraftDay.exercise == exercise, DraftDay.user_id == user_id)
    session.execute(delete(_table(DraftDay)).where(*mine))
    where = (Draft.exercise == exercise, Draft.user_id == user_id)
    _fill(session, DraftDay, draft_source(_dialect(session), *where))
    refreshed = counts.of_exercise(session, user_id, exercise)
    counts.apply(session, counts.lesson_of(exercise), before, refreshed, partition_of(user_id))


def draft_source(dialect: str, *where: ColumnElement[bool]) -> Any:
    """(exercise, learner, UTC day last saved) per draft."""
    return select(Draft.exercise, Draft.user_id, utc_day(Draft.updated_at, dialect)).where(*where)


def rebuild(bind: Bind) -> None:
    """Every rollup row from every source row (`python -m app.analytics rebuild`; the
    benchmark's). Events not yet applied may stay: applying them again changes nothing."""
    dialect = _dialect(bind)
    for model, source in (
        (StepDay, step_source),
        (AnswerDay, answer_source),
        (AttemptDay, attempt_source),
        (CheckDay, check_source),
        (DraftDay, draft_source),
    ):
        bind.execute(delete(_table(model)))
        _fill(bind, model, source(dialect))
    counts.rebuild(bind)


def forget_learner(session: Session, user_id: uuid.UUID) -> None:
    """Take a deleted learner's contributions off the counters, and their rollup rows with
    them (their source rows are gone already)."""
    shard = partition_of(user_id)
    lessons = {
        *session.scalars(select(StepDay.lesson_id).where(StepDay.user_id == user_id)),
        *session.scalars(select(AnswerDay.lesson_id).where(AnswerDay.user_id == user_id)),
    }
    for lesson_id in sorted(lessons):
        before = counts.of_lesson(session, user_id, lesson_id)
        counts.apply(session, lesson_id, before, (Counter(), Counter()), shard)
    exercises = {
        *session.scalars(select(AttemptDay.exercise).where(AttemptDay.user_id == user_id)),
        *session.scalars(select(DraftDay.exercise).where(DraftDay.user_id == user_id)),
    }
    for exercise in sorted(exercises):
        contributed = counts.of_exercise(session, user_id, exercise)
        empty: tuple[counts.Tally, ...] = (Counter(), Counter(), Counter())
        counts.apply(session, counts.lesson_of(exercise), contributed, empty, shard)
    for model in ROLLUPS:
        session.execute(delete(_table(model)).where(model.user_id == user_id))
