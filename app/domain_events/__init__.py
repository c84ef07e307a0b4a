"""Domain events: a domain (learning, submissions, drafts, accounts) records what happened as a
row of the outbox (`models.DomainEvent`) in its own transaction, and knows nothing of who reads
it. After the commit, the listeners subscribed here (the analytics consumer, wired in
`app.main`) are told which partitions got new events; they read the rows themselves, so a
listener that was down or missed a call loses nothing (its poll finds them).

The kinds are defined once, below; a consumer applies each by recomputing what it summarises
from the source rows, so an event applied twice counts once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum

from sqlalchemy import insert
from sqlalchemy.orm import Session

from app.db import after_commit, utcnow
from app.domain_events.models import DomainEvent

log = logging.getLogger(__name__)

# A learner's events all fall in one partition; a consumer holds a partition while it applies
# its events, so they are applied one at a time, in order, while other partitions go on.
PARTITIONS = 4


class Kind(StrEnum):
    PROGRESS = "progress.recorded"  # new progress events of a lesson (subject) on a day
    SUBMISSION = "submission.changed"  # a submission of an exercise made or graded (its day)
    DRAFT = "draft.changed"  # a draft of an exercise saved on a new day, or deleted
    ACCOUNT_DELETED = "account.deleted"  # the learner and all their rows are gone


@dataclass(frozen=True)
class Event:
    kind: Kind
    user_id: uuid.UUID
    subject: str = ""
    day: date | None = None


def partition_of(user_id: uuid.UUID) -> int:
    return user_id.int % PARTITIONS


Listener = Callable[[frozenset[int]], None]
_listeners: list[Listener] = []


def subscribe(listener: Listener) -> Callable[[], None]:
    """Call `listener` with the partitions of the events of each commit; returns the
    unsubscribe."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


@dataclass
class _Publish:
    partitions: set[int] = field(default_factory=set)

    def __call__(self) -> None:
        for listener in list(_listeners):
            listener(frozenset(self.partitions))


def record(session: Session, events: Sequence[Event]) -> None:
    """Add the events to the session's transaction; the listeners hear of them once it commits."""
    now = utcnow()
    rows = [
        {
            "kind": str(event.kind),
            "user_id": event.user_id,
            "subject": event.subject,
            "day": event.day,
            "partition": partition_of(event.user_id),
            "recorded_at": now,
        }
        for event in events
    ]
    if not rows:
        return
    session.execute(insert(DomainEvent), rows)
    publish: _Publish = after_commit(session, _Publish(), key=_Publish)
    publish.partitions.update(partition_of(event.user_id) for event in events)
