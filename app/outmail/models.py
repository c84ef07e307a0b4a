"""The mail outbox: one row per mail not yet sent (deleted once sent or given up)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Integer, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow


class OutgoingMail(Base):
    __tablename__ = "mail_outbox"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    to_address: Mapped[str] = mapped_column(String(320))
    subject: Mapped[str] = mapped_column(String(500))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # When it may be tried (again): now when queued, later after a failure (the backoff).
    due_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # A sender that took the mail holds it until then (a sender that died lets go by itself).
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    last_error: Mapped[str | None] = mapped_column(String(500), default=None)
