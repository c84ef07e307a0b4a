"""Tables: progress events as sent by clients, the merged state per lesson, a cursor per learner."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow


class ProgressEvent(Base):
    """An event exactly as a client sent it; stored once per (learner, client event id)."""

    __tablename__ = "progress_events"
    __table_args__ = (
        UniqueConstraint("user_id", "client_id"),
        Index(  # the instructors' analytics (covering on PostgreSQL)
            "ix_progress_events_lesson_type",
            "lesson_id",
            "type",
            "user_id",
            "at",
            postgresql_include=["client_id", "locale", "payload"],
        ),
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    client_id: Mapped[str] = mapped_column(String(64))
    type: Mapped[str] = mapped_column(String(32))
    lesson_id: Mapped[str] = mapped_column(String(100))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The interface language of the request that sent it (instructor analytics); None: unknown.
    locale: Mapped[str | None] = mapped_column(String(16), default=None)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LessonProgress(Base):
    """A learner's merged state in one lesson; `version` is the cursor that last changed it."""

    __tablename__ = "lesson_progress"
    __table_args__ = (Index("ix_lesson_progress_user_id_version", "user_id", "version"),)

    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    lesson_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON)
    version: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ProgressCursor(Base):
    """One row per learner. Every change bumps `version`; updating the row first serialises a
    learner's concurrent writers (row lock on PostgreSQL, write lock on SQLite)."""

    __tablename__ = "progress_cursors"

    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(BigInteger, default=0)
