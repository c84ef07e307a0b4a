"""A frozen copy of what migration i28_rollups needs to backfill the analytics rollups: the
rollup and counter tables, and the code that filled them, as they were at that revision
(app/analytics/rollups.py and counts.py of 2026-12-03), over Core tables of the source rows as
they were then. The app's own code has moved on (domain events, sharded counters); this copy
must not: a migration replays the same whatever the app is today. Imports nothing of the app.
Loaded by the migration from its file (`migrations/` is not a package).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime
from typing import Any

import sqlalchemy as sa
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

ALL = "*"
NONE = date(1, 1, 1)
NEVER = date(9999, 12, 31)
STEP_TYPES = ("step_seen", "step_completed", "position")
JUDGED = ("pass", "fail")

Bind = Connection
Keys = tuple[Any, ...]
Tally = Counter[tuple[Any, ...]]
_metadata = sa.MetaData()


def _at(name: str) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True))


class _Model:
    """A table whose columns read as attributes (`Model.column`), as the copied code reads them."""

    def __init__(self, table: Table) -> None:
        self.__table__ = table
        self.__tablename__ = table.name

    def __getattr__(self, name: str) -> Any:
        return self.__table__.c[name]


def _model(name: str, *columns: sa.Column[Any]) -> Any:
    return _Model(Table(name, _metadata, *columns))


def _s(name: str, length: int) -> sa.Column[Any]:
    return sa.Column(name, sa.String(length))


ProgressEvent = _model(
    "progress_events",
    sa.Column("id", sa.BigInteger()),
    sa.Column("user_id", sa.Uuid()),
    _s("type", 32),
    _s("lesson_id", 100),
    _at("at"),
    sa.Column("payload", sa.JSON()),
    _s("locale", 16),
)
Submission = _model(
    "submissions",
    sa.Column("id", sa.Uuid()),
    sa.Column("user_id", sa.Uuid()),
    _s("exercise", 200),
    _s("locale", 16),
    _s("verdict", 8),
    _s("first_failed_check", 64),
    _at("created_at"),
)
Draft = _model(
    "submission_drafts",
    sa.Column("user_id", sa.Uuid()),
    _s("exercise", 200),
    _at("updated_at"),
)
StepDay = _model(
    "analytics_step_days",
    _s("lesson_id", 100),
    _s("locale", 16),
    _s("step_id", 100),
    sa.Column("user_id", sa.Uuid()),
    sa.Column("day", sa.Date()),
    sa.Column("completed", sa.Integer()),
)
AnswerDay = _model(
    "analytics_answer_days",
    _s("lesson_id", 100),
    _s("locale", 16),
    _s("question_id", 100),
    _s("choice", 100),
    sa.Column("user_id", sa.Uuid()),
    sa.Column("day", sa.Date()),
    _at("first_at"),
    _at("first_right_at"),
)
AttemptDay = _model(
    "analytics_attempt_days",
    _s("exercise", 200),
    _s("locale", 16),
    sa.Column("user_id", sa.Uuid()),
    sa.Column("day", sa.Date()),
    sa.Column("submissions", sa.Integer()),
    sa.Column("judged", sa.Integer()),
    sa.Column("failed", sa.Integer()),
    sa.Column("judged_to_pass", sa.Integer()),
    _at("first_at"),
    _at("first_pass_at"),
)
CheckDay = _model(
    "analytics_check_days",
    _s("exercise", 200),
    _s("locale", 16),
    _s("check_id", 64),
    sa.Column("user_id", sa.Uuid()),
    sa.Column("day", sa.Date()),
    sa.Column("failed", sa.Integer()),
)
DayCount = _model(
    "analytics_day_counts",
    *(_s(name, 200) for name in ("lesson_id", "scope", "locale", "item", "detail")),
    sa.Column("day", sa.Date()),
    sa.Column("prev_day", sa.Date()),
    *(sa.Column(name, sa.Integer()) for name in ("flag", "learners", "amount")),
)
PassCount = _model(
    "analytics_pass_counts",
    _s("exercise", 200),
    _s("locale", 16),
    *(sa.Column(name, sa.Date()) for name in ("day", "prev_day", "pass_day")),
    *(sa.Column(n, sa.Integer()) for n in ("judged_to_pass", "minutes_to_pass", "learners")),
)


def as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def utc_day(column: Any, dialect: str) -> Any:
    """The UTC calendar day of a timestamp column, as a date."""
    if dialect == "postgresql":
        return cast(func.timezone("UTC", column), Date)
    return func.date(column)  # SQLite keeps UTC text: 'YYYY-MM-DD HH:MM:SS...'


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
    return bind.dialect.name


def rebuild(bind: Bind) -> None:
    """Every rollup row from every source row (a migration's backfill; the benchmark's)."""
    dialect = _dialect(bind)
    for model, source in (
        (StepDay, step_source),
        (AnswerDay, answer_source),
        (AttemptDay, attempt_source),
        (CheckDay, check_source),
    ):
        bind.execute(delete(_table(model)))
        _fill(bind, model, source(dialect))
    _rebuild_counts(bind)


def _streams(days: Iterable[date]) -> Iterator[tuple[date, date]]:
    """(day, previous active day or NONE) for each active day."""
    previous = NONE
    for day in sorted(set(days)):
        yield day, previous
        previous = day


def lesson_tally(steps: Iterable[Any], answers: Iterable[Any]) -> tuple[Tally, Tally]:
    """One learner's (learners, amount) contributions from their step and answer rows of one
    lesson: (learners tally, amount tally)."""
    learners: Tally = Counter()
    reached: dict[tuple[str, str], list[date]] = defaultdict(list)
    completed: dict[tuple[str, str], list[date]] = defaultdict(list)
    for row in steps:
        reached[(row.locale, row.step_id)].append(row.day)
        if row.completed:
            completed[(row.locale, row.step_id)].append(row.day)
    for scope, found in (("reached", reached), ("completed", completed)):
        for (locale, step), days in found.items():
            for day, prev in _streams(days):
                learners[(scope, locale, step, "", day, prev, 0)] += 1
    firsts: dict[tuple[str, str, date], tuple[datetime, datetime | None]] = {}
    chosen: dict[tuple[str, str, str], list[date]] = defaultdict(list)
    for row in answers:
        key = (row.locale, row.question_id, row.day)
        first_at, first_right_at = as_utc(row.first_at), row.first_right_at
        first_right_at = as_utc(first_right_at) if first_right_at is not None else None
        if key in firsts:
            seen_at, seen_right_at = firsts[key]
            first_at = min(first_at, seen_at)
            rights = [moment for moment in (first_right_at, seen_right_at) if moment is not None]
            first_right_at = min(rights) if rights else None
        firsts[key] = (first_at, first_right_at)
        chosen[(row.locale, row.question_id, row.choice)].append(row.day)
    answered: dict[tuple[str, str], dict[date, int]] = defaultdict(dict)
    for (locale, question, day), (first_at, first_right_at) in firsts.items():
        answered[(locale, question)][day] = int(first_right_at == first_at)
    for (locale, question), flags in answered.items():
        for day, prev in _streams(flags):
            learners[("answered", locale, question, "", day, prev, flags[day])] += 1
    for (locale, question, choice), days in chosen.items():
        for day, prev in _streams(days):
            learners[("chosen", locale, question, choice, day, prev, 0)] += 1
    return learners, Counter()


def exercise_tally(
    exercise: str, attempts: Iterable[Any], checks: Iterable[Any], draft_day: date | None
) -> tuple[Tally, Tally, Counter[tuple[Any, ...]]]:
    """One learner's contributions from their rows of one exercise: (learners tally, amount
    tally, PassCount keys (exercise, locale, day, prev_day, pass_day, judged, minutes))."""
    learners: Tally = Counter()
    amounts: Tally = Counter()
    passes: Counter[tuple[Any, ...]] = Counter()
    by_locale: dict[str, list[Any]] = defaultdict(list)
    for row in attempts:
        by_locale[row.locale].append(row)
    for locale, rows in by_locale.items():
        rows.sort(key=lambda row: row.day)
        opened = [row.day for row in rows]
        if draft_day is not None and locale == ALL:
            opened.append(draft_day)
        for day, prev in _streams(opened):
            learners[("opened", locale, exercise, "", day, prev, 0)] += 1
        failing = {row.day: row.failed for row in rows if row.failed}
        for day, prev in _streams(failing):
            learners[("failing", locale, exercise, "", day, prev, 0)] += 1
            amounts[("failing", locale, exercise, "", day, prev, 0)] += failing[day]
        for start, (day, prev) in enumerate(_streams(row.day for row in rows)):
            passes[(exercise, locale, day, prev, *_to_pass(rows[start:]))] += 1
    if draft_day is not None and not by_locale:  # a draft alone: opened, in no locale ('')
        for locale in (ALL, ""):
            learners[("opened", locale, exercise, "", draft_day, NONE, 0)] += 1
    failed: dict[tuple[str, str], dict[date, int]] = defaultdict(dict)
    for row in checks:
        failed[(row.locale, row.check_id)][row.day] = row.failed
    for (locale, check), days in failed.items():
        for day, prev in _streams(days):
            learners[("check", locale, exercise, check, day, prev, 0)] += 1
            amounts[("check", locale, exercise, check, day, prev, 0)] += days[day]
    return learners, amounts, passes


def _to_pass(rows: list[Any]) -> tuple[date, int, int]:
    """From the first of these days (in order): the first pass's day, the judged submissions
    up to it and whole minutes from the first submission to it; (NEVER, 0, 0) without one."""
    judged = 0
    for row in rows:
        if row.first_pass_at is not None:
            seconds = (as_utc(row.first_pass_at) - as_utc(rows[0].first_at)).total_seconds()
            return row.day, judged + row.judged_to_pass, int(seconds // 60)
        judged += row.judged
    return NEVER, 0, 0


def _count(lesson_id: str, key: tuple[Any, ...], learners: int, amount: int) -> dict[str, Any]:
    names = ("scope", "locale", "item", "detail", "day", "prev_day", "flag")
    return {
        "lesson_id": lesson_id,
        **dict(zip(names, key, strict=True)),
        "learners": learners,
        "amount": amount,
    }


def _pass(key: tuple[Any, ...], learners: int) -> dict[str, Any]:
    names = (
        "exercise",
        "locale",
        "day",
        "prev_day",
        "pass_day",
        "judged_to_pass",
        "minutes_to_pass",
    )
    return {**dict(zip(names, key, strict=True)), "learners": learners}


def lesson_of(exercise: str) -> str:
    return exercise.partition("/")[0]


def _rebuild_counts(bind: Bind) -> None:
    """Every counter from every learner's day rollups (after `rollups.rebuild`)."""
    learners: Tally = Counter()
    amounts: Tally = Counter()
    passes: Counter[tuple[Any, ...]] = Counter()

    def grouped(model: Any, *keys: str) -> dict[tuple[Any, ...], list[Any]]:
        found: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
        for row in bind.execute(select(model.__table__)):
            found[tuple(getattr(row, key) for key in keys)].append(row)
        return found

    steps = grouped(StepDay, "lesson_id", "user_id")
    answers = grouped(AnswerDay, "lesson_id", "user_id")
    for lesson_id, user_id in steps.keys() | answers.keys():
        lessons = lesson_tally(
            steps.get((lesson_id, user_id), []), answers.get((lesson_id, user_id), [])
        )
        learners.update({(lesson_id, *key): value for key, value in lessons[0].items()})
    attempts = grouped(AttemptDay, "exercise", "user_id")
    checks = grouped(CheckDay, "exercise", "user_id")
    drafts = {
        (row.exercise, row.user_id): as_utc(row.updated_at).date()
        for row in bind.execute(select(Draft.exercise, Draft.user_id, Draft.updated_at))
    }
    for exercise, user_id in attempts.keys() | checks.keys() | drafts.keys():
        key = (exercise, user_id)
        tally = exercise_tally(
            exercise, attempts.get(key, []), checks.get(key, []), drafts.get(key)
        )
        lesson_id = lesson_of(exercise)
        learners.update({(lesson_id, *k): value for k, value in tally[0].items()})
        amounts.update({(lesson_id, *k): value for k, value in tally[1].items()})
        passes.update(tally[2])
    bind.execute(delete(_table(DayCount)))
    bind.execute(delete(_table(PassCount)))
    rows = [
        _count(key[0], key[1:], learners[key], amounts[key])
        for key in sorted(learners.keys() | amounts.keys(), key=repr)
    ]
    for start in range(0, len(rows), 5000):
        bind.execute(insert(_table(DayCount)), rows[start : start + 5000])
    counted = [_pass(key, value) for key, value in passes.items()]
    for start in range(0, len(counted), 5000):
        bind.execute(insert(_table(PassCount)), counted[start : start + 5000])
