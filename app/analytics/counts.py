"""The counters the report reads (`DayCount`, `PassCount`), kept from the per-learner day
rollups: a learner's contributions to them follow from their own rollup rows of one lesson (its
steps and answers) or one exercise (attempts, checks, draft), so a change to those rows
replaces that learner's contributions: what they added before is taken off, what they add now
is added (`apply`) to the learner's shard: the partition of their domain events, which one
consumer at a time applies, so their before and after are never interleaved, and consumers of
different partitions never write the same counter row.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from datetime import date, datetime
from typing import Any

from sqlalchemy import Table, delete, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.analytics.models import (
    ALL,
    NEVER,
    NONE,
    AnswerDay,
    AttemptDay,
    CheckDay,
    DayCount,
    DraftDay,
    PassCount,
    StepDay,
)
from app.db import as_utc
from app.domain_events import partition_of

Bind = Session | Connection
# A DayCount's key less its lesson: (scope, locale, item, detail, day, prev_day, flag).
Tally = Counter[tuple[Any, ...]]


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


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


def _upsert(bind: Bind, table: Any, rows: list[dict[str, Any]], sums: list[str]) -> None:
    if not rows:
        return
    dialect = bind.get_bind().dialect.name if isinstance(bind, Session) else bind.dialect.name
    statement = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)
    keys = [column.name for column in table.primary_key.columns]
    statement = statement.on_conflict_do_update(
        index_elements=keys,
        set_={name: table.c[name] + statement.excluded[name] for name in sums},
    )
    bind.execute(statement, rows)


def apply(bind: Bind, lesson_id: str, before: Any, after: Any, shard: int) -> None:
    """Replace a learner's contributions `before` (a tally triple) with `after`, in `shard`."""
    learners = Counter(after[0])
    learners.subtract(before[0])
    amounts = Counter(after[1])
    amounts.subtract(before[1])
    changed = sorted(
        {key for key, value in learners.items() if value}
        | {key for key, value in amounts.items() if value},
        key=repr,
    )
    _upsert(
        bind,
        _table(DayCount),
        [_count(lesson_id, key, learners[key], amounts[key], shard) for key in changed],
        ["learners", "amount"],
    )
    if len(before) > 2:
        passes = Counter(after[2])
        passes.subtract(before[2])
        _upsert(
            bind,
            _table(PassCount),
            [_pass(key, passes[key], shard) for key in sorted(passes, key=repr) if passes[key]],
            ["learners"],
        )


def _count(
    lesson_id: str, key: tuple[Any, ...], learners: int, amount: int, shard: int
) -> dict[str, Any]:
    names = ("scope", "locale", "item", "detail", "day", "prev_day", "flag")
    return {
        "lesson_id": lesson_id,
        **dict(zip(names, key, strict=True)),
        "shard": shard,
        "learners": learners,
        "amount": amount,
    }


def _pass(key: tuple[Any, ...], learners: int, shard: int) -> dict[str, Any]:
    names = (
        "exercise",
        "locale",
        "day",
        "prev_day",
        "pass_day",
        "judged_to_pass",
        "minutes_to_pass",
    )
    return {**dict(zip(names, key, strict=True)), "shard": shard, "learners": learners}


def of_lesson(session: Session, user_id: uuid.UUID, lesson_id: str) -> tuple[Tally, Tally]:
    steps = session.execute(
        select(StepDay).where(StepDay.lesson_id == lesson_id, StepDay.user_id == user_id)
    ).scalars()
    answers = session.execute(
        select(AnswerDay).where(AnswerDay.lesson_id == lesson_id, AnswerDay.user_id == user_id)
    ).scalars()
    return lesson_tally(list(steps), list(answers))


def of_exercise(
    session: Session, user_id: uuid.UUID, exercise: str
) -> tuple[Tally, Tally, Counter[tuple[Any, ...]]]:
    attempts = session.execute(
        select(AttemptDay).where(AttemptDay.exercise == exercise, AttemptDay.user_id == user_id)
    ).scalars()
    checks = session.execute(
        select(CheckDay).where(CheckDay.exercise == exercise, CheckDay.user_id == user_id)
    ).scalars()
    draft_day = session.scalar(
        select(DraftDay.day).where(DraftDay.exercise == exercise, DraftDay.user_id == user_id)
    )
    return exercise_tally(exercise, list(attempts), list(checks), draft_day)


def lesson_of(exercise: str) -> str:
    return exercise.partition("/")[0]


def rebuild(bind: Bind) -> None:
    """Every counter from every learner's day rollups (after `rollups.rebuild`), each learner's
    contributions in their shard."""
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
        shard = partition_of(user_id)
        learners.update({(lesson_id, shard, *key): value for key, value in lessons[0].items()})
    attempts = grouped(AttemptDay, "exercise", "user_id")
    checks = grouped(CheckDay, "exercise", "user_id")
    drafts = {
        (row.exercise, row.user_id): row.day
        for row in bind.execute(select(DraftDay.exercise, DraftDay.user_id, DraftDay.day))
    }
    for exercise, user_id in attempts.keys() | checks.keys() | drafts.keys():
        key = (exercise, user_id)
        tally = exercise_tally(
            exercise, attempts.get(key, []), checks.get(key, []), drafts.get(key)
        )
        lesson_id, shard = lesson_of(exercise), partition_of(user_id)
        learners.update({(lesson_id, shard, *k): value for k, value in tally[0].items()})
        amounts.update({(lesson_id, shard, *k): value for k, value in tally[1].items()})
        passes.update({(shard, *k): value for k, value in tally[2].items()})
    bind.execute(delete(_table(DayCount)))
    bind.execute(delete(_table(PassCount)))
    rows = [
        _count(key[0], key[2:], learners[key], amounts[key], key[1])
        for key in sorted(learners.keys() | amounts.keys(), key=repr)
    ]
    for start in range(0, len(rows), 5000):
        bind.execute(insert(_table(DayCount)), rows[start : start + 5000])
    counted = [_pass(key[1:], value, key[0]) for key, value in passes.items()]
    for start in range(0, len(counted), 5000):
        bind.execute(insert(_table(PassCount)), counted[start : start + 5000])
