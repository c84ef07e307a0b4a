"""The analytics queries: SQL over progress events, drafts and submissions, grouped in the
database. Every count is of distinct learners unless its name says submissions.

A learner's locale, when the figures are split by locale, is the interface language of their
first progress event in the lesson (else of their first submission there): one locale per
learner, so the per-locale figures add up to the totals. Learners with neither are ''.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, case, func, literal, select, union_all
from sqlalchemy.orm import Session

from app.learning.models import ProgressEvent
from app.submissions.models import Draft, Submission

STEP_TYPES = ("step_seen", "step_completed", "position")
JUDGED = ("pass", "fail")


@dataclass(frozen=True)
class Window:
    """What one report reads: a lesson's events and its exercises' submissions in [since, until)."""

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


def _learner_locales(window: Window) -> Any:
    """(user_id, locale): each learner's first known interface language in the lesson."""
    events = select(
        ProgressEvent.user_id.label("user_id"),
        ProgressEvent.locale.label("locale"),
        ProgressEvent.at.label("at"),
        literal(0).label("source"),
    ).where(ProgressEvent.lesson_id == window.lesson_id, ProgressEvent.locale.is_not(None))
    submitted = select(
        Submission.user_id.label("user_id"),
        Submission.locale.label("locale"),
        Submission.created_at.label("at"),
        literal(1).label("source"),
    ).where(Submission.exercise.in_(window.exercises))
    known = union_all(events, submitted).subquery()
    ranked = select(
        known.c.user_id,
        known.c.locale,
        func.row_number()
        .over(partition_by=known.c.user_id, order_by=(known.c.source, known.c.at, known.c.locale))
        .label("rank"),
    ).subquery()
    return select(ranked.c.user_id, ranked.c.locale).where(ranked.c.rank == 1).subquery()


def _with_locale(query: Any, user_id: Any, window: Window) -> tuple[Any, Any]:
    """The query with a `locale` column (the learner's, or '' when not split)."""
    if not window.by_locale:
        return query.add_columns(literal("").label("locale")), literal("")
    locales = _learner_locales(window)
    locale = func.coalesce(locales.c.locale, "").label("locale")
    return query.add_columns(locale).outerjoin(locales, locales.c.user_id == user_id), locale


def step_counts(session: Session, window: Window) -> Sequence[Any]:
    """(step_id, locale, reached, completed) per step with any event."""
    step_id = ProgressEvent.payload["step_id"].as_string()
    completed = case((ProgressEvent.type == "step_completed", ProgressEvent.user_id))
    query = select(
        step_id.label("step_id"),
        func.count(ProgressEvent.user_id.distinct()).label("reached"),
        func.count(completed.distinct()).label("completed"),
    ).where(
        ProgressEvent.lesson_id == window.lesson_id,
        ProgressEvent.type.in_(STEP_TYPES),
        *_in_range(ProgressEvent.at, window),
    )
    query, locale = _with_locale(query, ProgressEvent.user_id, window)
    return session.execute(query.group_by(step_id, locale)).all()


def _answers(window: Window) -> Any:
    """Every quiz answer in the window, with its rank among the learner's answers to it."""
    question_id = ProgressEvent.payload["question_id"].as_string()
    return (
        select(
            ProgressEvent.user_id.label("user_id"),
            question_id.label("question_id"),
            ProgressEvent.payload["choice"].as_string().label("choice"),
            ProgressEvent.payload["correct"].as_boolean().label("correct"),
            func.row_number()
            .over(
                partition_by=(ProgressEvent.user_id, question_id),
                order_by=(ProgressEvent.at, ProgressEvent.client_id),
            )
            .label("attempt"),
        )
        .where(
            ProgressEvent.lesson_id == window.lesson_id,
            ProgressEvent.type == "quiz_answered",
            *_in_range(ProgressEvent.at, window),
        )
        .subquery()
    )


def question_counts(session: Session, window: Window) -> Sequence[Any]:
    """(question_id, locale, answered, first_try_right) per question answered."""
    answers = _answers(window)
    first_right = case(
        ((answers.c.attempt == 1) & (answers.c.correct == True), answers.c.user_id)  # noqa: E712
    )
    query = select(
        answers.c.question_id,
        func.count(answers.c.user_id.distinct()).label("answered"),
        func.count(first_right.distinct()).label("first_try_right"),
    )
    query, locale = _with_locale(query, answers.c.user_id, window)
    return session.execute(query.group_by(answers.c.question_id, locale)).all()


def choice_counts(session: Session, window: Window) -> Sequence[Any]:
    """(question_id, choice, locale, learners who ever chose it)."""
    answers = _answers(window)
    query = select(
        answers.c.question_id,
        answers.c.choice,
        func.count(answers.c.user_id.distinct()).label("learners"),
    )
    query, locale = _with_locale(query, answers.c.user_id, window)
    return session.execute(query.group_by(answers.c.question_id, answers.c.choice, locale)).all()


def opened_counts(session: Session, window: Window) -> Sequence[Any]:
    """(exercise, locale, opened): learners with a draft or a submission of the exercise."""
    drafts = select(Draft.user_id.label("user_id"), Draft.exercise.label("exercise")).where(
        Draft.exercise.in_(window.exercises), *_in_range(Draft.updated_at, window)
    )
    submitted = select(Submission.user_id, Submission.exercise).where(
        Submission.exercise.in_(window.exercises), *_in_range(Submission.created_at, window)
    )
    opened = union_all(drafts, submitted).subquery()
    query = select(opened.c.exercise, func.count(opened.c.user_id.distinct()).label("opened"))
    query, locale = _with_locale(query, opened.c.user_id, window)
    return session.execute(query.group_by(opened.c.exercise, locale)).all()


@dataclass(frozen=True)
class LearnerAttempts:
    exercise: str
    user_id: uuid.UUID
    locale: str
    judged_to_pass: int | None  # judged submissions up to and including the first pass
    failed: int  # submissions the grader failed
    first_at: datetime
    first_pass_at: datetime | None


def learner_attempts(session: Session, window: Window) -> list[LearnerAttempts]:
    """One row per learner who submitted each exercise in the window."""
    judged = case((Submission.verdict.in_(JUDGED), 1), else_=0)
    ranked = (
        select(
            Submission.exercise,
            Submission.user_id,
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
    query = select(
        ranked.c.exercise,
        ranked.c.user_id,
        func.min(case((passed, ranked.c.judged_rank))).label("judged_to_pass"),
        func.sum(case((ranked.c.verdict == "fail", 1), else_=0)).label("failed"),
        func.min(ranked.c.created_at).label("first_at"),
        func.min(case((passed, ranked.c.created_at))).label("first_pass_at"),
    )
    query, locale = _with_locale(query, ranked.c.user_id, window)
    rows = session.execute(query.group_by(ranked.c.exercise, ranked.c.user_id, locale)).all()
    return [
        LearnerAttempts(
            exercise=row.exercise,
            user_id=row.user_id,
            locale=row.locale,
            judged_to_pass=int(row.judged_to_pass) if row.judged_to_pass is not None else None,
            failed=int(row.failed or 0),
            first_at=row.first_at,
            first_pass_at=row.first_pass_at,
        )
        for row in rows
    ]


def first_failing_checks(session: Session, window: Window) -> Sequence[Any]:
    """(exercise, check_id, locale, submissions, learners) over failed submissions; check_id
    is '' for a failed Result without a failed check."""
    check_id = func.coalesce(Submission.first_failed_check, "")
    query = select(
        Submission.exercise,
        check_id.label("check_id"),
        func.count().label("submissions"),
        func.count(Submission.user_id.distinct()).label("learners"),
    ).where(
        Submission.exercise.in_(window.exercises),
        Submission.verdict == "fail",
        *_in_range(Submission.created_at, window),
    )
    query, locale = _with_locale(query, Submission.user_id, window)
    return session.execute(query.group_by(Submission.exercise, check_id, locale)).all()
