"""The analytics consumer: applies the domain events (app.domain_events) to the rollups, after
their commit, off the request path.

`apply_batch` is one unit of work on one partition: it holds the partition's row (so no other
consumer applies the same learners' events meanwhile: one learner's events are applied one at a
time, in `id` order), applies the oldest events of the partition, deletes them and notes the
lag, all in the caller's transaction. A crash anywhere in it rolls all of it back: the events
are applied again by the next try, and since applying one recomputes what it summarises from
the committed source rows, nothing is counted twice or lost.

Two ways to run it: `ThreadConsumer`, an object owning one thread in the app's process (the
default set-up, SQLite or PostgreSQL), woken after each commit that recorded events and
polling besides; and the procrastinate task of `app.analytics.queue`, for several app
processes on PostgreSQL.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.analytics import rollups
from app.analytics.models import ConsumerPartition
from app.db import SessionFactory, as_utc, utcnow
from app.domain_events import PARTITIONS, Kind
from app.domain_events.models import DomainEvent

log = logging.getLogger(__name__)

BATCH = 500


@dataclass
class _Work:
    """A batch's events, folded: each (learner, item, day) is recomputed once."""

    lesson_days: dict[uuid.UUID, set[tuple[str, date]]]
    attempt_days: set[tuple[uuid.UUID, str, date]]
    drafts: set[tuple[uuid.UUID, str]]
    deleted: set[uuid.UUID]


def _fold(events: Sequence[DomainEvent]) -> _Work:
    work = _Work(defaultdict(set), set(), set(), set())
    for event in events:
        kind = Kind(event.kind)
        if kind is Kind.ACCOUNT_DELETED:
            work.deleted.add(event.user_id)
        elif kind is Kind.DRAFT:
            work.drafts.add((event.user_id, event.subject))
        elif event.day is None:
            log.warning("a %s event without a day was skipped", kind)
        elif kind is Kind.PROGRESS:
            work.lesson_days[event.user_id].add((event.subject, event.day))
        else:
            work.attempt_days.add((event.user_id, event.subject, event.day))
    return work


def _apply(session: Session, work: _Work) -> None:
    for user_id, lesson_days in sorted(work.lesson_days.items()):
        rollups.refresh_events(session, user_id, lesson_days)
    for user_id, exercise, day in sorted(work.attempt_days):
        rollups.refresh_attempts(session, user_id, exercise, day)
    for user_id, exercise in sorted(work.drafts):
        rollups.refresh_draft(session, user_id, exercise)
    for user_id in sorted(work.deleted):  # after the rest: their rows all go
        rollups.forget_learner(session, user_id)


def hold(session: Session, partition: int) -> ConsumerPartition | None:
    """The partition's row, locked for this transaction; None when another consumer holds it
    (PostgreSQL: it skips, and that consumer applies what is there). SQLite has one writer at
    a time anyway."""
    query = select(ConsumerPartition).where(ConsumerPartition.partition == partition)
    held = session.scalar(query.with_for_update(skip_locked=True))
    if held is None and session.get(ConsumerPartition, partition) is None:
        session.add(held := ConsumerPartition(partition=partition, applied=0, lag_ms=0))
        session.flush()
    return held


def hold_all(session: Session) -> None:
    """Every partition, waiting for the consumers that hold one (a rebuild: no consumer
    writes the counters while they are rebuilt)."""
    query = select(ConsumerPartition).order_by(ConsumerPartition.partition)
    session.execute(query.with_for_update()).all()


def apply_batch(session: Session, partition: int, limit: int = BATCH) -> int:
    """Apply up to `limit` of the partition's oldest events; how many were applied."""
    held = hold(session, partition)
    if held is None:
        return 0
    events = list(
        session.scalars(
            select(DomainEvent)
            .where(DomainEvent.partition == partition)
            .order_by(DomainEvent.id)
            .limit(limit)
        )
    )
    if not events:
        return 0
    _apply(session, _fold(events))
    # The ids read, not "up to the last": an event of a lower id may commit after this read
    # (ids are taken at insert, commits come in any order); the next batch applies it.
    session.execute(delete(DomainEvent).where(DomainEvent.id.in_([e.id for e in events])))
    now = utcnow()
    oldest = min(as_utc(event.recorded_at) for event in events)
    held.applied += len(events)
    held.applied_at = now
    held.lag_ms = int((now - oldest).total_seconds() * 1000)
    return len(events)


def drain(session: Session) -> int:
    """Every pending event of every partition, in this session's transaction (tests; the
    rebuild command). How many were applied."""
    total = 0
    for partition in range(PARTITIONS):
        while applied := apply_batch(session, partition):
            total += applied
    session.flush()
    return total


def figures_as_of(session: Session) -> datetime | None:
    """When the oldest event not yet applied was recorded: the figures include everything
    before it (None: every event is applied, the figures are current)."""
    oldest: datetime | None = session.scalar(select(func.min(DomainEvent.recorded_at)))
    return None if oldest is None else as_utc(oldest)


class ThreadConsumer:
    """Applies the events in a thread of its own, partition after partition, each batch in a
    unit of work of its own: woken by `notify` (subscribed to the domain events after commit)
    and every `poll_seconds` besides (events committed by another process, a missed wake-up).
    An error rolls its batch back and is retried after `retry_seconds`."""

    def __init__(
        self,
        session_factory: SessionFactory,
        *,
        poll_seconds: float = 2.0,
        retry_seconds: float = 1.0,
        batch: int = BATCH,
    ) -> None:
        self._uow = session_factory
        self._poll_seconds = poll_seconds
        self._retry_seconds = retry_seconds
        self._batch = batch
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="analytics-consumer", daemon=True)
        self._thread.start()

    def notify(self, partitions: frozenset[int] = frozenset()) -> None:
        self._wakeup.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def run_once(self) -> int:
        """One batch of each partition; how many events were applied."""
        applied = 0
        for partition in range(PARTITIONS):
            with self._uow() as session:
                applied += apply_batch(session, partition, self._batch)
        return applied

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wakeup.clear()
            try:
                while self.run_once() and not self._stopping.is_set():
                    pass
            except Exception:
                log.exception("the analytics consumer failed; retrying")
                self._stopping.wait(self._retry_seconds)
                continue
            self._wakeup.wait(self._poll_seconds)
