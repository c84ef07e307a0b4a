"""Table: every question a learner asked the coach and the answer they got."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow


class CoachExchange(Base):
    """One question and its answer: the learner's own history, and where learners struggle.

    Deleted with the account (ON DELETE CASCADE); a deleted submission only loses the link.
    """

    __tablename__ = "coach_exchanges"
    __table_args__ = (
        Index("ix_coach_exchanges_user_created", "user_id", "created_at"),
        Index("ix_coach_exchanges_lesson_created", "lesson_id", "created_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    lesson_id: Mapped[str] = mapped_column(String(64))
    step_id: Mapped[str | None] = mapped_column(String(64), default=None)
    exercise: Mapped[str | None] = mapped_column(String(200), default=None)
    submission_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("submissions.id", ondelete="SET NULL"), default=None
    )
    # The failed check whose "Why did this fail?" button asked, if one did.
    check_id: Mapped[str | None] = mapped_column(String(64), default=None)
    # The failed check a question about a failure was about, a button's or typed (escalation).
    about_check: Mapped[str | None] = mapped_column(String(64), default=None)
    # The checks the asked-about submission failed: [{"id", "title" (English, from its Result)}]
    failed_checks: Mapped[list[dict[str, str]]] = mapped_column(
        JSON, default=list, server_default="[]"
    )
    locale: Mapped[str] = mapped_column(String(16))
    question: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)
    # [{"lesson_id", "step_id", "title", "url"}]
    sources: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    provider: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
