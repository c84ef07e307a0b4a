"""The analytics queries: SQL over progress events, drafts and submissions, grouped in the
database so that what comes back is a few rows per step, question, choice, exercise and check,
never a row per learner. Every count is of distinct learners unless its name says submissions:
each query groups by (item, learner) first, then counts learners per item (a hash aggregate,
where COUNT(DISTINCT) would sort).

Split by locale, a row's locale is the interface language its own event or submission was sent
in ('' when unknown: events older than the column, and drafts, which carry none); a learner who
changed language counts once in each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    and_,
    case,
    cast,
    exists,
    func,
    literal,
    select,
    text,
    union_all,
)
from sqlalchemy.orm import Session

from app.learning.models import ProgressEvent
from app.submissions.models import Draft, Submission

STEP_TYPES = ("step_seen", "step_completed", "position")
JUDGED = ("pass", "fail")


@dataclass(frozen=True)
class Window:
    """What one query reads: a lesson's events and its exercises' submissions in
    [since, until), grouped by locale or not."""

    lesson_id: str
    exercises: tuple[str, ...]
    since: datetime | None
    until: datetime | None
    by_locale: bool


def _in_range(column: Any, window: Window) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if window.since is not None:
        conditions.append(column >= window.since)
    if window.until is not None:
        conditions.append(column < window.until)
    return conditions


def _locale(column: Any, window: Window) -> Any:
    return (func.coalesce(column, "") if window.by_locale else literal("")).label("locale")


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


def _events(window: Window, *conditions: ColumnElement[bool]) -> list[ColumnElement[bool]]:
    return [
        ProgressEvent.lesson_id == window.lesson_id,
        *conditions,
        *_in_range(ProgressEvent.at, window),
    ]


def step_counts(session: Session, window: Window) -> Sequence[Any]:
    """(step_id, locale, learners = reached, completed) per step with any event."""
    step_id = ProgressEvent.payload["step_id"].as_string().label("step_id")
    locale = _locale(ProgressEvent.locale, window)
    completed = case((ProgressEvent.type == "step_completed", 1), else_=0)
    per_learner = (
        select(step_id, locale, ProgressEvent.user_id, func.max(completed).label("completed"))
        .where(*_events(window, ProgressEvent.type.in_(STEP_TYPES)))
        .group_by(step_id, locale, ProgressEvent.user_id)
        .subquery()
    )
    return _learners_per(session, per_learner, "step_id")


def question_counts(session: Session, window: Window) -> Sequence[Any]:
    """(question_id, locale, learners = answered, first_try_right) per question answered.
    Right at the first try: the learner's earliest answer to it is also their earliest right one."""
    question_id = ProgressEvent.payload["question_id"].as_string().label("question_id")
    locale = _locale(ProgressEvent.locale, window)
    correct = ProgressEvent.payload["correct"].as_boolean()
    answers = (
        select(
            question_id,
            locale,
            ProgressEvent.user_id,
            func.min(ProgressEvent.at).label("first_at"),
            func.min(case((correct, ProgressEvent.at))).label("first_right_at"),
        )
        .where(*_events(window, ProgressEvent.type == "quiz_answered"))
        .group_by(question_id, locale, ProgressEvent.user_id)
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
    question_id = ProgressEvent.payload["question_id"].as_string().label("question_id")
    choice = ProgressEvent.payload["choice"].as_string().label("choice")
    locale = _locale(ProgressEvent.locale, window)
    per_learner = (
        select(question_id, choice, locale, ProgressEvent.user_id)
        .where(*_events(window, ProgressEvent.type == "quiz_answered"))
        .group_by(question_id, choice, locale, ProgressEvent.user_id)
        .subquery()
    )
    return _learners_per(session, per_learner, "question_id", "choice")


def opened_counts(session: Session, window: Window) -> Sequence[Any]:
    """(exercise, locale, learners = opened): learners with a draft or a submission. Split by
    locale, a draft counts only for a learner without a submission of it (as '')."""
    drafts = select(
        Draft.exercise.label("exercise"), literal("").label("locale"), Draft.user_id
    ).where(Draft.exercise.in_(window.exercises), *_in_range(Draft.updated_at, window))
    if window.by_locale:
        submitted_too = exists().where(
            and_(Submission.user_id == Draft.user_id, Submission.exercise == Draft.exercise)
        )
        drafts = drafts.where(~submitted_too)
    submitted = select(
        Submission.exercise, _locale(Submission.locale, window), Submission.user_id
    ).where(Submission.exercise.in_(window.exercises), *_in_range(Submission.created_at, window))
    both = union_all(drafts, submitted).subquery()
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
    first pass (None: never passed); `minutes_to_pass`: whole minutes from their first
    submission to that pass; `failed_any`: 1 if the grader failed any of their submissions."""
    judged = case((Submission.verdict.in_(JUDGED), 1), else_=0)
    locale = _locale(Submission.locale, window)
    ranked = (
        select(
            Submission.exercise,
            Submission.user_id,
            locale,
            Submission.verdict,
            Submission.created_at,
            func.sum(judged)
            .over(
                partition_by=(Submission.exercise, Submission.user_id),
                order_by=(Submission.created_at, Submission.id),
                rows=(None, 0),
            )
            .label("judged_rank"),
        )
        .where(Submission.exercise.in_(window.exercises), *_in_range(Submission.created_at, window))
        .subquery()
    )
    passed = ranked.c.verdict == "pass"
    failed = case((ranked.c.verdict == "fail", 1), else_=0)
    per_learner = (
        select(
            ranked.c.exercise,
            ranked.c.locale,
            func.min(case((passed, ranked.c.judged_rank))).label("judged_to_pass"),
            func.min(ranked.c.created_at).label("first_at"),
            func.min(case((passed, ranked.c.created_at))).label("first_pass_at"),
            func.sum(failed).label("failed"),
        )
        .group_by(ranked.c.exercise, ranked.c.locale, ranked.c.user_id)
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
    check_id = func.coalesce(Submission.first_failed_check, "").label("check_id")
    locale = _locale(Submission.locale, window)
    per_learner = (
        select(
            Submission.exercise,
            check_id,
            locale,
            Submission.user_id,
            func.count().label("submissions"),
        )
        .where(
            Submission.exercise.in_(window.exercises),
            Submission.verdict == "fail",
            *_in_range(Submission.created_at, window),
        )
        .group_by(Submission.exercise, check_id, locale, Submission.user_id)
        .subquery()
    )
    return _learners_per(session, per_learner, "exercise", "check_id")
