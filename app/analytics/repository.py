"""The analytics queries: sums over the counters (app/analytics/models.py: DayCount,
PassCount), a few rows per step, question, choice, exercise and check and day, never a row per
learner. Every count is of distinct learners unless its name says submissions: a learner
counts once, on their first active day in the range (the rows whose previous active day is
before it), so the sums are exact for any range of whole days.

A row's locale is ALL ('*') for the totals; split by locale, the other rows are each locale's
(the interface language its own event or submission was sent in; '' when unknown: events older
than the column, and drafts, which carry none); a learner who changed language counts once in
each. Without the split only ALL rows are read.

The date range is of whole UTC days: [since, until), each a date.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from types import SimpleNamespace
from typing import Any

from sqlalchemy import ColumnElement, case, func, select, text
from sqlalchemy.orm import Session

from app.analytics.models import ALL, NEVER, NONE, DayCount, PassCount


@dataclass(frozen=True)
class Window:
    """What one query reads: a lesson's counters on the days in [since, until) (None: no
    bound), the totals (locale ALL) and, `by_locale`, each locale's rows."""

    lesson_id: str
    exercises: tuple[str, ...]
    since: date | None
    until: date | None
    by_locale: bool


def _days(model: Any, window: Window) -> list[ColumnElement[bool]]:
    """The counter rows of the window's days and locales (less their item condition)."""
    conditions: list[ColumnElement[bool]] = []
    if not window.by_locale:
        conditions.append(model.locale == ALL)
    if window.since is not None:
        conditions.append(model.day >= window.since)
    if window.until is not None:
        conditions.append(model.day < window.until)
    return conditions


def _first(model: Any, window: Window) -> ColumnElement[bool]:
    """A learner's first active day in the range: no active day before it in the range."""
    if window.since is None:
        return model.prev_day == NONE
    return model.prev_day < window.since


def tune(session: Session) -> None:
    """On PostgreSQL, no JIT compilation: these are short queries over small rows, and
    compiling them would take longer than running them."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SET LOCAL jit = off"))


def _counted(session: Session, window: Window, scopes: Sequence[str], *extra: Any) -> Sequence[Any]:
    """(scope, item, detail, locale, *extra, learners, amount) of a lesson's counters."""
    count = DayCount
    learners = func.sum(case((_first(count, window), count.learners), else_=0))
    amount = func.sum(count.amount)
    keys = (count.scope, count.item, count.detail, count.locale, *extra)
    query = (
        select(*keys, learners.label("learners"), amount.label("amount"))
        .where(
            count.lesson_id == window.lesson_id,
            count.scope.in_(scopes),
            *_days(count, window),
        )
        .group_by(*keys)
        .having((learners > 0) | (amount > 0))  # counters a learner's change left at 0
    )
    return session.execute(query).all()


def _rows(**fields: Any) -> SimpleNamespace:
    return SimpleNamespace(**fields)


def step_counts(session: Session, window: Window) -> Sequence[Any]:
    """(step_id, locale, learners = reached, completed) per step with any event."""
    found: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in _counted(session, window, ("reached", "completed")):
        found[(row.item, row.locale)][row.scope] += int(row.learners or 0)
    return [
        _rows(step_id=step, locale=locale, learners=n["reached"], completed=n["completed"])
        for (step, locale), n in found.items()
    ]


def question_counts(session: Session, window: Window) -> Sequence[Any]:
    """(question_id, locale, learners = answered, first_try_right) per question answered.
    Right at the first try: the learner's first answer in the range was right."""
    found: dict[tuple[str, str], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for row in _counted(session, window, ("answered",), DayCount.flag):
        found[(row.item, row.locale)][row.flag] += int(row.learners or 0)
    return [
        _rows(question_id=question, locale=locale, learners=n[0] + n[1], first_try_right=n[1])
        for (question, locale), n in found.items()
    ]


def choice_counts(session: Session, window: Window) -> Sequence[Any]:
    """(question_id, choice, locale, learners who chose it in the range)."""
    return [
        _rows(question_id=row.item, choice=row.detail, locale=row.locale, learners=row.learners)
        for row in _counted(session, window, ("chosen",))
    ]


def opened_counts(session: Session, window: Window) -> Sequence[Any]:
    """(exercise, locale, learners = opened): learners with a draft or a submission. A draft
    counts in the totals; split by locale, only for a learner without a submission of it (as
    ''). A draft is one row per learner and exercise: the day it was last saved is its day."""
    return [
        _rows(exercise=row.item, locale=row.locale, learners=row.learners)
        for row in _counted(session, window, ("opened",))
    ]


def failing_counts(session: Session, window: Window) -> Sequence[Any]:
    """(exercise, locale, learners with a failed submission, failed submissions)."""
    return [
        _rows(exercise=row.item, locale=row.locale, learners=row.learners, failed=row.amount)
        for row in _counted(session, window, ("failing",))
    ]


def first_failing_checks(session: Session, window: Window) -> Sequence[Any]:
    """(exercise, check_id, locale, learners, submissions) over failed submissions; check_id
    is '' for a failed Result without a failed check."""
    return [
        _rows(
            exercise=row.item,
            check_id=row.detail,
            locale=row.locale,
            learners=row.learners,
            submissions=row.amount,
        )
        for row in _counted(session, window, ("check",))
    ]


def attempt_histogram(session: Session, window: Window) -> Sequence[Any]:
    """Learners who submitted, grouped by what a median needs: (exercise, locale,
    judged_to_pass, minutes_to_pass) -> learners. `judged_to_pass`: the judged (pass or fail)
    submissions from their first in the range up to and including their first pass in it
    (None: no pass in the range); `minutes_to_pass`: whole minutes from that first submission
    to that pass."""
    row = PassCount
    passed = row.pass_day < (window.until or NEVER)
    keys = (
        row.exercise,
        row.locale,
        passed.label("passed"),
        row.judged_to_pass,
        row.minutes_to_pass,
    )
    query = (
        select(*keys, func.sum(row.learners).label("learners"))
        .where(row.exercise.in_(window.exercises), _first(row, window), *_days(row, window))
        .group_by(*keys)
        .having(func.sum(row.learners) > 0)
    )
    return [
        _rows(
            exercise=found.exercise,
            locale=found.locale,
            judged_to_pass=found.judged_to_pass if found.passed else None,
            minutes_to_pass=found.minutes_to_pass if found.passed else None,
            learners=found.learners,
        )
        for found in session.execute(query).all()
    ]
