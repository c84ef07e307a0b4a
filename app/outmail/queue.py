"""The mail outbox's rows (issue 39, D6: mail kept in memory was lost on a restart, and dropped
after a few seconds of relay trouble while the user had been told 202).

`enqueue(session, ...)` adds the mail in the caller's transaction: it exists exactly when what
it tells of (an account, a reset link) was committed, and wakes the senders once that commit
is done. A sender `claim`s due mails for `LEASE_S` (a sender that dies lets go by itself; on
PostgreSQL two senders skip each other's rows), then `sent` deletes a mail, or `failed` puts it
back with a growing pause (`backoff`), and after `MAX_ATTEMPTS` deletes it, logged. A mail is
therefore sent at least once unless the relay refuses it for days; never silently dropped.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from app.db import after_commit, utcnow
from app.outmail.models import OutgoingMail

log = logging.getLogger(__name__)

LEASE_S = 120.0  # longer than one delivery can take (the SMTP timeout)
MAX_ATTEMPTS = 12  # 2 s, 4 s, ... 10 min apart: about an hour and a half of trying
FIRST_PAUSE_S = 2.0
MAX_PAUSE_S = 600.0

_wakers: set[threading.Event] = set()


def subscribe(waker: threading.Event) -> None:
    """`waker` is set after every commit that queued a mail (a sender waits on it)."""
    _wakers.add(waker)


def unsubscribe(waker: threading.Event) -> None:
    _wakers.discard(waker)


def _wake() -> None:
    for waker in list(_wakers):
        waker.set()


@dataclass(frozen=True)
class Claimed:
    id: uuid.UUID
    to: str
    subject: str
    body: str
    attempts: int  # before this one


def enqueue(session: Session, *, to: str, subject: str, body: str) -> None:
    now = utcnow()
    session.add(OutgoingMail(to_address=to, subject=subject, body=body, created_at=now, due_at=now))
    after_commit(session, _wake, key=_wake)  # the app's one way to act after a commit


def backoff(attempts: int) -> timedelta:
    """The pause after the `attempts`-th failure."""
    return timedelta(seconds=min(MAX_PAUSE_S, FIRST_PAUSE_S * 2 ** max(0, attempts - 1)))


def claim(session: Session, *, limit: int, now: datetime | None = None) -> list[Claimed]:
    """Up to `limit` due mails, oldest first, now held by the caller for LEASE_S."""
    now = now or utcnow()
    rows = session.scalars(
        select(OutgoingMail)
        .execution_options(populate_existing=True)
        .where(
            OutgoingMail.due_at <= now,
            or_(OutgoingMail.claimed_until.is_(None), OutgoingMail.claimed_until < now),
        )
        .order_by(OutgoingMail.due_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    claimed = []
    for row in rows:
        row.claimed_until = now + timedelta(seconds=LEASE_S)
        claimed.append(Claimed(row.id, row.to_address, row.subject, row.body, row.attempts))
    session.flush()
    return claimed


def sent(session: Session, mail_id: uuid.UUID) -> None:
    session.execute(delete(OutgoingMail).where(OutgoingMail.id == mail_id))


def failed(session: Session, mail: Claimed, error: str, now: datetime | None = None) -> None:
    """Back in the queue after a pause, or (after MAX_ATTEMPTS) given up: deleted, logged."""
    attempts = mail.attempts + 1
    if attempts >= MAX_ATTEMPTS:
        log.error("mail %s given up after %d attempts (last error: %s)", mail.id, attempts, error)
        sent(session, mail.id)
        return
    log.warning("mail %s: attempt %d failed (%s); tried again later", mail.id, attempts, error)
    session.execute(
        update(OutgoingMail)
        .where(OutgoingMail.id == mail.id)
        .values(
            attempts=attempts,
            due_at=(now or utcnow()) + backoff(attempts),
            claimed_until=None,
            last_error=error[:500],
        )
    )


def release(session: Session, ids: list[uuid.UUID]) -> None:
    """Let go of claimed mails not sent (a sender that stops): due again at once."""
    if ids:
        session.execute(
            update(OutgoingMail).where(OutgoingMail.id.in_(ids)).values(claimed_until=None)
        )


def waiting(session: Session) -> int:
    """Mails not yet sent."""
    return len(session.scalars(select(OutgoingMail.id)).all())
