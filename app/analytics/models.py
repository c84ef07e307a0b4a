"""The analytics rollups: per (item, learner, locale, UTC day), what the instructors' report
needs of that learner's events and submissions of that day, kept in step with the source rows
by `app.analytics.rollups` from the domain events (`app.analytics.consumer`), never written
by hand. The learner columns carry no foreign key: when an account is deleted, its rows stay
until the consumer applies the deletion and takes the learner's contributions off the counters.

Each source row counts twice: under its own locale ('' when unknown) and under ALL ('*'), the
learner's day across every locale. The report without the locale split reads only ALL rows;
with it, ALL rows are the totals and the others the split, from one scan. ALL rows are stored
rather than derived because an attempt's rank (judged submissions up to the first pass) does not
add up across locales within a day: only the learner's whole day orders them.

A day is a UTC calendar day: the report's date range is exact to the day, no finer.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime

from sqlalchemy import Date, Index, Integer, SmallInteger, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime

ALL = "*"


def _learner() -> Mapped[uuid.UUID]:
    return mapped_column(Uuid, primary_key=True)


class StepDay(Base):
    """A learner reached a step (a step event) on a day; `completed`: one was step_completed."""

    __tablename__ = "analytics_step_days"
    # One learner's rows, to recompute them (and to forget them when their account goes).
    __table_args__ = (Index("ix_analytics_step_days_user", "user_id", "lesson_id"),)

    lesson_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    locale: Mapped[str] = mapped_column(String(16), primary_key=True)
    step_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    user_id: Mapped[uuid.UUID] = _learner()
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    completed: Mapped[int] = mapped_column(Integer)


class AnswerDay(Base):
    """A learner chose a choice of a question on a day: their first such answer that day, and
    the first of them that was right (None: none was)."""

    __tablename__ = "analytics_answer_days"
    # One learner's rows, to recompute them (and to forget them when their account goes).
    __table_args__ = (Index("ix_analytics_answer_days_user", "user_id", "lesson_id"),)

    lesson_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    locale: Mapped[str] = mapped_column(String(16), primary_key=True)
    question_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    choice: Mapped[str] = mapped_column(String(100), primary_key=True)
    user_id: Mapped[uuid.UUID] = _learner()
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    first_at: Mapped[datetime] = mapped_column(UTCDateTime())
    first_right_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)


class AttemptDay(Base):
    """A learner's submissions of an exercise on a day (any status): how many, how many were
    judged (pass or fail) and failed, `judged_to_pass` (judged submissions of the day up to and
    including its first pass; None: no pass that day), the first one's time and the first pass's.
    """

    __tablename__ = "analytics_attempt_days"
    # One learner's rows, to recompute them (and to forget them when their account goes).
    __table_args__ = (Index("ix_analytics_attempt_days_user", "user_id", "exercise"),)

    exercise: Mapped[str] = mapped_column(String(200), primary_key=True)
    locale: Mapped[str] = mapped_column(String(16), primary_key=True)
    user_id: Mapped[uuid.UUID] = _learner()
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    submissions: Mapped[int] = mapped_column(Integer)
    judged: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    judged_to_pass: Mapped[int | None] = mapped_column(Integer, default=None)
    first_at: Mapped[datetime] = mapped_column(UTCDateTime())
    first_pass_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)


class CheckDay(Base):
    """A learner's failed submissions of an exercise on a day whose first failed check was
    `check_id` ('' for a failed Result without a failed check)."""

    __tablename__ = "analytics_check_days"
    # One learner's rows, to recompute them (and to forget them when their account goes).
    __table_args__ = (Index("ix_analytics_check_days_user", "user_id", "exercise"),)

    exercise: Mapped[str] = mapped_column(String(200), primary_key=True)
    locale: Mapped[str] = mapped_column(String(16), primary_key=True)
    check_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[uuid.UUID] = _learner()
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    failed: Mapped[int] = mapped_column(Integer)


class DraftDay(Base):
    """A learner's draft of an exercise, by the day it was last saved (it opens the exercise
    on that day): the draft as the counters last counted it."""

    __tablename__ = "analytics_draft_days"

    exercise: Mapped[str] = mapped_column(String(200), primary_key=True)
    user_id: Mapped[uuid.UUID] = _learner()
    day: Mapped[date] = mapped_column(Date)


# The counters the report reads: learners summed across learners, per (item, locale, day,
# previous day). A learner's `day`s of activity on an item each add one learner under
# (day, the learner's previous active day, or NONE): the learners active in [since, until) are
# then exactly those of the rows with since <= day < until and prev_day < since (the first
# active day of each in the range), with no row per learner to read. Kept by
# `app.analytics.counts` from the per-learner day rollups above. No hot rows: each counter is
# split in `shard`s, one per partition of the domain events (the learner's), so consumers of
# different partitions never write the same row; the report sums the shards.
NONE = date(1, 1, 1)  # no previous active day
NEVER = date(9999, 12, 31)  # no pass on or after the day


class DayCount(Base):
    """`scope`: reached, completed (steps), answered (`flag`: the day's first answer was
    right), chosen (`detail`: the choice), opened, failing (learners with a failed submission;
    `amount`: failed submissions that day), check (`detail`: the first failing check; `amount`:
    failed submissions that day)."""

    __tablename__ = "analytics_day_counts"

    lesson_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    locale: Mapped[str] = mapped_column(String(16), primary_key=True)
    item: Mapped[str] = mapped_column(String(200), primary_key=True)
    detail: Mapped[str] = mapped_column(String(100), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    prev_day: Mapped[date] = mapped_column(Date, primary_key=True)
    flag: Mapped[int] = mapped_column(Integer, primary_key=True)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True, default=0)
    learners: Mapped[int] = mapped_column(Integer)
    amount: Mapped[int] = mapped_column(Integer)


class PassCount(Base):
    """Learners of an exercise by their first day in a range (`day`, after `prev_day`): the
    day of their first pass on or after it (NEVER: none), the judged submissions from `day` up
    to that pass and the whole minutes from that day's first submission to it (0 without)."""

    __tablename__ = "analytics_pass_counts"

    exercise: Mapped[str] = mapped_column(String(200), primary_key=True)
    locale: Mapped[str] = mapped_column(String(16), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    prev_day: Mapped[date] = mapped_column(Date, primary_key=True)
    pass_day: Mapped[date] = mapped_column(Date, primary_key=True)
    judged_to_pass: Mapped[int] = mapped_column(Integer, primary_key=True)
    minutes_to_pass: Mapped[int] = mapped_column(Integer, primary_key=True)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True, default=0)
    learners: Mapped[int] = mapped_column(Integer)


class ConsumerPartition(Base):
    """One partition of the domain events, as the analytics consumer left it: held (row lock)
    while a consumer applies its events; how many it applied and when, and how old the oldest
    event of its last batch was then (the lag of the figures)."""

    __tablename__ = "analytics_partitions"

    partition: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    applied: Mapped[int] = mapped_column(Integer, default=0)
    applied_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    lag_ms: Mapped[int] = mapped_column(Integer, default=0)
