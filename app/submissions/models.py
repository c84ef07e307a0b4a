"""Tables: submissions (the source of truth for a grading job), their events, and drafts."""

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
    Text,
    UniqueConstraint,
    Uuid,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow

# SQLite only auto-increments an INTEGER PRIMARY KEY.
EventId = BigInteger().with_variant(Integer(), "sqlite")

# Submission lifecycle: queued -> running -> done | error (error: the platform failed).
QUEUED, RUNNING, DONE, ERROR = "queued", "running", "done", "error"
UNFINISHED = (QUEUED, RUNNING)


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (
        # A double click sends the same Idempotency-Key twice: one submission.
        UniqueConstraint("user_id", "idempotency_key", name="uq_submissions_user_idempotency"),
        Index("ix_submissions_status_created", "status", "created_at"),
        Index("ix_submissions_user_status", "user_id", "status"),
        Index(  # the instructors' analytics (covering on PostgreSQL)
            "ix_submissions_exercise_user",
            "exercise",
            "user_id",
            "created_at",
            "id",
            postgresql_include=["verdict", "locale", "first_failed_check"],
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    exercise: Mapped[str] = mapped_column(String(200))
    code: Mapped[str] = mapped_column(Text)
    locale: Mapped[str] = mapped_column(String(16), default="en")
    idempotency_key: Mapped[str | None] = mapped_column(String(200), default=None)
    status: Mapped[str] = mapped_column(String(16), default=QUEUED)
    # The grader's Result as JSON once graded (also for a platform error).
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    # Copied from the Result when it is stored, for the instructors' analytics: its status
    # (pass | fail | error) and the id of its first failing check.
    verdict: Mapped[str | None] = mapped_column(String(8), default=None)
    first_failed_check: Mapped[str | None] = mapped_column(String(64), default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Which queue it went to ("local", "cpu", "gpu") and when it was handed over.
    queue: Mapped[str | None] = mapped_column(String(16), default=None)
    dispatched_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    # The queue's own job id (procrastinate), to spot a job the queue gave up on.
    queue_job_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    # Lease of a running job: who runs it and when it last said it is alive.
    lease_owner: Mapped[str | None] = mapped_column(String(200), default=None)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)


class SubmissionEvent(Base):
    """What the browser sees live, kept so a reconnecting browser resumes where it left off.

    The id is the Server-Sent Event id; one writer per submission appends in order.
    """

    __tablename__ = "submission_events"

    id: Mapped[int] = mapped_column(EventId, primary_key=True, autoincrement=True)
    submission_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True
    )
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    kind: Mapped[str] = mapped_column(String(16))  # status | output | check | done
    rank: Mapped[int | None] = mapped_column(Integer, default=None)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Draft(Base):
    """The learner's unsubmitted code for one exercise, so another device or a reload has it."""

    __tablename__ = "submission_drafts"

    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    exercise: Mapped[str] = mapped_column(String(200), primary_key=True)
    code: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
