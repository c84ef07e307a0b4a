"""The outbox: what happened in a domain, one row per event, written in the domain's own
transaction and deleted by the consumer that applied it (app.analytics.consumer)."""

from __future__ import annotations

import uuid
from datetime import date, datetime

from sqlalchemy import BigInteger, Date, Index, Integer, SmallInteger, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow


class DomainEvent(Base):
    """`kind`: an `app.domain_events.Kind`; `subject`: the lesson or exercise it concerns ('' for
    the whole account); `day`: the UTC day of the rows it changed (None: any day). No foreign
    key to the learner: an account's deletion is itself an event, read after the account is
    gone. `partition`: the learner's (`partition_of`), so one consumer at a time applies one
    learner's events, in `id` order."""

    __tablename__ = "domain_events"
    __table_args__ = (Index("ix_domain_events_partition", "partition", "id"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    kind: Mapped[str] = mapped_column(String(32))
    user_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    subject: Mapped[str] = mapped_column(String(200), default="")
    day: Mapped[date | None] = mapped_column(Date, default=None)
    partition: Mapped[int] = mapped_column(SmallInteger)
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
