"""Queries for progress: events (inserted once), merged lesson rows, the learner's cursor."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.learning.models import LessonProgress, ProgressCursor, ProgressEvent


def _insert(session: Session, table: Any) -> Any:
    dialect = session.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def lock_cursor(session: Session, user_id: uuid.UUID) -> ProgressCursor:
    """The learner's cursor row, made if missing and locked until the transaction ends, in one
    statement (one round trip while holding the lock): an upsert that rewrites the version it
    finds locks the row on PostgreSQL; on SQLite the transaction holds the write lock already
    (BEGIN IMMEDIATE). Either way one learner's concurrent writers run one after the other."""
    statement = (
        _insert(session, ProgressCursor)
        .values(user_id=user_id, version=0)
        .on_conflict_do_update(index_elements=["user_id"], set_={"version": ProgressCursor.version})
        .returning(ProgressCursor)
        .execution_options(populate_existing=True)
    )
    return session.scalars(statement).one()


def current_version(session: Session, user_id: uuid.UUID) -> int:
    version = session.scalar(
        select(ProgressCursor.version).where(ProgressCursor.user_id == user_id)
    )
    return int(version or 0)


def insert_new_events(
    session: Session, user_id: uuid.UUID, rows: Sequence[dict[str, Any]]
) -> set[str]:
    """Insert events whose (learner, client id) is new; returns the client ids inserted.

    ON CONFLICT DO NOTHING makes a retried or duplicated event a no-op, also when two requests
    carry it at the same moment (the unique constraint decides, not a prior SELECT).
    """
    if not rows:
        return set()
    # One compiled statement for any batch size (executemany; SQLAlchemy batches the VALUES).
    table = ProgressEvent.__table__
    statement = (
        _insert(session, table)
        .on_conflict_do_nothing(index_elements=["user_id", "client_id"])
        .returning(table.c.client_id)
    )
    # In client id order: two concurrent batches sharing events wait on each other's rows in the
    # same order, never in a cycle.
    ordered = sorted(rows, key=lambda row: str(row["client_id"]))
    result = session.execute(statement, [{**row, "user_id": user_id} for row in ordered])
    return set(result.scalars().all())


def lessons_for_update(
    session: Session, user_id: uuid.UUID, lesson_ids: Sequence[str]
) -> dict[str, LessonProgress]:
    rows = session.scalars(
        select(LessonProgress).where(
            LessonProgress.user_id == user_id, LessonProgress.lesson_id.in_(list(lesson_ids))
        )
    )
    return {row.lesson_id: row for row in rows}


def lessons_changed_since(session: Session, user_id: uuid.UUID, since: int) -> list[LessonProgress]:
    return list(
        session.scalars(
            select(LessonProgress)
            .where(LessonProgress.user_id == user_id, LessonProgress.version > since)
            .order_by(LessonProgress.lesson_id)
        )
    )


def lessons_of_learner(session: Session, user_id: uuid.UUID) -> dict[str, LessonProgress]:
    rows = session.scalars(select(LessonProgress).where(LessonProgress.user_id == user_id))
    return {row.lesson_id: row for row in rows}


def get_lesson(session: Session, user_id: uuid.UUID, lesson_id: str) -> LessonProgress | None:
    return session.get(LessonProgress, (user_id, lesson_id))


def save_lesson(
    session: Session,
    existing: LessonProgress | None,
    *,
    user_id: uuid.UUID,
    lesson_id: str,
    state: dict[str, Any],
    version: int,
    now: datetime,
) -> LessonProgress:
    if existing is None:
        existing = LessonProgress(user_id=user_id, lesson_id=lesson_id)
        session.add(existing)
    existing.state = state  # a new dict: the JSON column sees the change
    existing.version = version
    existing.updated_at = now
    return existing
