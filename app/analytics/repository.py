"""The analytics queries: SQL over the rollups (app/analytics/models.py: per item, learner,
locale and UTC day), grouped in the database so that what comes back is a few rows per step,
question, choice, exercise and check, never a row per learner. Every count is of distinct
learners unless its name says submissions: each query groups by (item, locale, learner) over
the days in range first, then counts learners per item (a streaming aggregate in the rollups'
primary-key order, where COUNT(DISTINCT) would sort).

A row's locale is ALL ('*') for the totals; split by locale, the other rows are each locale's
(the interface language its own event or submission was sent in; '' when unknown: events older
than the column, and drafts, which carry none); a learner who changed language counts once in
each. Without the split only ALL rows are read.

The date range is of whole UTC days: [since, until), each a date.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    and_,
    case,
    cast,
    exists,
    func,
    literal_column,
    select,
    text,
    union_all,
)
from sqlalchemy.orm import Session

from app.analytics.models import ALL, AnswerDay, AttemptDay, CheckDay, StepDay
from app.analytics.rollups import day_start
from app.submissions.models import Draft


@dataclass(frozen=True)
class Window:
    """What one query reads: a lesson's rollups on the days in [since, until) (None: no bound),
    the totals (locale ALL) and, `by_locale`, each locale's rows."""

    lesson_id: str
    exercises: tuple[str, ...]
    since: date | None
    until: date | None
    by_locale: bool


def _rows(model: Any, window: Window) -> list[ColumnElement[bool]]:
    """The rollup rows a window reads (less its item condition)."""
    conditions: list[ColumnElement[bool]] = []
    if not window.by_locale:
        conditions.append(model.locale == ALL)
    if window.since is not None:
        conditions.append(model.day >= window.since)
    if window.until is not None:
        conditions.append(model.day < window.until)
    return conditions


def tune(session: Session) -> None:
    """On PostgreSQL, room for this transaction's sorts and hashes in memory (the default 4 MB
    spills the per-learner grouping of 10,000 learners to disk)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SET LOCAL work_mem = '64MB'"))


def _learners_per(session: Session, per_learner: Any, *keys: str) -> Sequence[Any]:
    """Count the learners of a (keys..., locale, user_id, flags...) subquery per keys and
    locale; every other integer column is summed as learners with that flag set."""
    flags = [column for column in per_learner.c if column.name not in (*keys, "locale", "user_id")]
    group = [per_learner.c[key] for key in keys] + [per_learner.c.locale]
    query = select(
        *group,
        func.count().label("learners"),
        *[func.sum(flag).label(flag.name) for flag in flags],
    ).group_by(*group)
    return session.execute(query).all()


def step_counts(session: Session, window: Window) -> Sequence[Any]:
    """(step_id, locale, learners = reached, completed) per step with any event."""
    row = StepDay
    per_learner = (
        select(row.step_id, row.locale, row.user_id, func.max(row.completed).label("completed"))
        .where(row.lesson_id == window.lesson_id, *_rows(row, window))
        .group_by(row.locale, row.step_id, row.user_id)
        .subquery()
    )
    return _learners_per(session, per_learner, "step_id")


def question_counts(session: Session, window: Window) -> Sequence[Any]:
    """(question_id, locale, learners = answered, first_try_right) per question answered.
    Right at the first try: the learner's earliest answer to it is also their earliest right one."""
    row = AnswerDay
    answers = (
        select(
            row.question_id,
            row.locale,
            row.user_id,
            func.min(row.first_at).label("first_at"),
            func.min(row.first_right_at).label("first_right_at"),
        )
        .where(row.lesson_id == window.lesson_id, *_rows(row, window))
        .group_by(row.locale, row.question_id, row.user_id)
        .subquery()
    )
    first_right = case((answers.c.first_right_at == answers.c.first_at, 1), else_=0)
    per_learner = select(
        answers.c.question_id,
        answers.c.locale,
        answers.c.user_id,
        first_right.label("first_try_right"),
    ).subquery()
    return _learners_per(session, per_learner, "question_id")


def choice_counts(session: Session, window: Window) -> Sequence[Any]:
    """(question_id, choice, locale, learners who ever chose it)."""
    row = AnswerDay
    per_learner = (
        select(row.question_id, row.choice, row.locale, row.user_id)
        .where(row.lesson_id == window.lesson_id, *_rows(row, window))
        .group_by(row.locale, row.question_id, row.choice, row.user_id)
        .subquery()
    )
    return _learners_per(session, per_learner, "question_id", "choice")


def opened_counts(session: Session, window: Window) -> Sequence[Any]:
    """(exercise, locale, learners = opened): learners with a draft or a submission. A draft
    counts in the totals; split by locale, only for a learner without a submission of it (as
    ''). A draft is one row per learner and exercise: the day it was last saved is its day."""
    in_range = []
    if window.since is not None:
        in_range.append(Draft.updated_at >= day_start(window.since))
    if window.until is not None:
        in_range.append(Draft.updated_at < day_start(window.until))
    drafted = [Draft.exercise.in_(window.exercises), *in_range]
    parts: list[Any] = [
        select(Draft.exercise, literal_column(f"'{ALL}'").label("locale"), Draft.user_id).where(
            *drafted
        )
    ]
    if window.by_locale:
        submitted_too = exists().where(
            and_(
                AttemptDay.exercise == Draft.exercise,
                AttemptDay.locale == ALL,
                AttemptDay.user_id == Draft.user_id,
            )
        )
        parts.append(
            select(Draft.exercise, literal_column("''").label("locale"), Draft.user_id).where(
                *drafted, ~submitted_too
            )
        )
    row = AttemptDay
    parts.append(
        select(row.exercise, row.locale, row.user_id).where(
            row.exercise.in_(window.exercises), *_rows(row, window)
        )
    )
    both = union_all(*parts).subquery()
    per_learner = (
        select(both.c.exercise, both.c.locale, both.c.user_id)
        .group_by(both.c.exercise, both.c.locale, both.c.user_id)
        .subquery()
    )
    return _learners_per(session, per_learner, "exercise")


def _minutes(later: Any, earlier: Any, dialect: str) -> Any:
    """Whole minutes between two timestamps, in the database's own arithmetic."""
    if dialect == "postgresql":
        return func.floor(func.extract("epoch", later - earlier) / 60)
    # julianday's float: a nudge keeps exactly 60 s from truncating to 0 minutes.
    return cast((func.julianday(later) - func.julianday(earlier)) * 1440 + 1e-6, Integer)


def attempt_histogram(session: Session, window: Window) -> Sequence[Any]:
    """Learners who submitted, grouped by what a median needs: (exercise, locale,
    judged_to_pass, minutes_to_pass, failed_any) -> learners, failed_submissions.

    `judged_to_pass`: the judged (pass or fail) submissions up to and including the learner's
    first pass in range (None: never passed): every judged one of the days before the day of
    that pass, and that day's own count up to it; `minutes_to_pass`: whole minutes from their
    first submission to that pass; `failed_any`: 1 if the grader failed any of theirs."""
    row = AttemptDay
    days = (
        select(
            row.exercise,
            row.locale,
            row.user_id,
            row.day,
            row.judged,
            row.judged_to_pass,
            row.failed,
            row.first_at,
            row.first_pass_at,
            func.min(case((row.first_pass_at.is_not(None), row.day)))
            .over(partition_by=(row.exercise, row.locale, row.user_id))
            .label("pass_day"),
        )
        .where(row.exercise.in_(window.exercises), *_rows(row, window))
        .subquery()
    )
    up_to_pass = case(
        (days.c.day < days.c.pass_day, days.c.judged),
        (days.c.day == days.c.pass_day, days.c.judged_to_pass),
    )
    per_learner = (
        select(
            days.c.exercise,
            days.c.locale,
            func.sum(up_to_pass).label("judged_to_pass"),
            func.min(days.c.first_at).label("first_at"),
            func.min(days.c.first_pass_at).label("first_pass_at"),
            func.sum(days.c.failed).label("failed"),
        )
        .group_by(days.c.exercise, days.c.locale, days.c.user_id)
        .subquery()
    )
    dialect = session.get_bind().dialect.name
    minutes = _minutes(per_learner.c.first_pass_at, per_learner.c.first_at, dialect)
    failed_any = case((per_learner.c.failed > 0, 1), else_=0)
    group = (
        per_learner.c.exercise,
        per_learner.c.locale,
        per_learner.c.judged_to_pass,
        minutes.label("minutes_to_pass"),
        failed_any.label("failed_any"),
    )
    query = select(
        *group,
        func.count().label("learners"),
        func.sum(per_learner.c.failed).label("failed_submissions"),
    ).group_by(*group)
    return session.execute(query).all()


def first_failing_checks(session: Session, window: Window) -> Sequence[Any]:
    """(exercise, check_id, locale, learners, submissions) over failed submissions; check_id
    is '' for a failed Result without a failed check."""
    row = CheckDay
    per_learner = (
        select(
            row.exercise,
            row.check_id,
            row.locale,
            row.user_id,
            func.sum(row.failed).label("submissions"),
        )
        .where(row.exercise.in_(window.exercises), *_rows(row, window))
        .group_by(row.exercise, row.locale, row.check_id, row.user_id)
        .subquery()
    )
    return _learners_per(session, per_learner, "exercise", "check_id")
