"""Queries on submissions, their events and drafts. Never commits (app/db.py does)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session

from app.auth.models import User
from app.db import as_utc, utcnow
from app.submissions.models import (
    QUEUED,
    RUNNING,
    UNFINISHED,
    Draft,
    Submission,
    SubmissionEvent,
)


def get(session: Session, submission_id: uuid.UUID) -> Submission | None:
    return session.get(Submission, submission_id)


def get_for_user(
    session: Session, *, user_id: uuid.UUID, submission_id: uuid.UUID
) -> Submission | None:
    return session.scalars(
        select(Submission).where(Submission.id == submission_id, Submission.user_id == user_id)
    ).one_or_none()


def get_by_idempotency_key(session: Session, *, user_id: uuid.UUID, key: str) -> Submission | None:
    return session.scalars(
        select(Submission).where(Submission.user_id == user_id, Submission.idempotency_key == key)
    ).one_or_none()


def lock_learner(session: Session, *, user_id: uuid.UUID) -> None:
    """Hold the learner's row until the transaction ends, so one learner's count-then-insert
    runs one at a time (PostgreSQL: FOR UPDATE; SQLite: its transactions begin IMMEDIATE, so
    writers are serialised already)."""
    session.execute(select(User.id).where(User.id == user_id).with_for_update())


QUEUE_LOCK = 39_016  # the advisory lock that orders submissions into the queue


def lock_queue(session: Session) -> None:
    """Take the queue's turn until the transaction ends, so that a new submission sees every
    one made before it (committed) and its queue position is unique and increasing (issue 39,
    N16: concurrent submissions each counted the others as not there). PostgreSQL: an advisory
    lock; SQLite's writers are serialised already."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(QUEUE_LOCK)))


def count_in_flight(session: Session, *, user_id: uuid.UUID) -> int:
    return (
        session.scalar(
            select(func.count())
            .select_from(Submission)
            .where(Submission.user_id == user_id, Submission.status.in_(UNFINISHED))
        )
        or 0
    )


def queue_position(session: Session, submission: Submission) -> int:
    """1 for the next submission to start: queued ones ahead of it in the queue's order
    (created_at, then id: submissions made at the same instant still get distinct places),
    plus itself."""
    created = submission.created_at
    ahead = session.scalar(
        select(func.count())
        .select_from(Submission)
        .where(
            Submission.status == QUEUED,
            (Submission.created_at < created)
            | ((Submission.created_at == created) & (Submission.id < submission.id)),
        )
    )
    return int(ahead or 0) + 1


def list_for_user(
    session: Session,
    *,
    user_id: uuid.UUID,
    exercise: str | None,
    limit: int,
    before: tuple[datetime, uuid.UUID] | None = None,
) -> Sequence[Submission]:
    """Newest first; `before`: only those after this (created_at, id) in that order."""
    query = select(Submission).where(Submission.user_id == user_id)
    if exercise is not None:
        query = query.where(Submission.exercise == exercise)
    if before is not None:
        created_at, submission_id = before
        query = query.where(
            or_(
                Submission.created_at < created_at,
                and_(Submission.created_at == created_at, Submission.id < submission_id),
            )
        )
    order = (Submission.created_at.desc(), Submission.id.desc())
    return session.scalars(query.order_by(*order).limit(limit)).all()


def add_event(
    session: Session,
    *,
    submission_id: uuid.UUID,
    attempt: int,
    kind: str,
    rank: int | None = None,
    data: dict[str, Any] | None = None,
) -> SubmissionEvent:
    event = SubmissionEvent(
        submission_id=submission_id, attempt=attempt, kind=kind, rank=rank, data=data or {}
    )
    session.add(event)
    return event


def events_after(
    session: Session, *, submission_id: uuid.UUID, after_id: int, limit: int = 500
) -> Sequence[SubmissionEvent]:
    return session.scalars(
        select(SubmissionEvent)
        .where(SubmissionEvent.submission_id == submission_id, SubmissionEvent.id > after_id)
        .order_by(SubmissionEvent.id)
        .limit(limit)
    ).all()


# Job lifecycle. Each returns how many rows it changed: 0 means someone else got there first.


def next_queued(session: Session, *, limit: int, undispatched_only: bool) -> Sequence[Submission]:
    query = select(Submission).where(Submission.status == QUEUED)
    if undispatched_only:
        query = query.where(Submission.dispatched_at.is_(None))
    return session.scalars(query.order_by(Submission.created_at, Submission.id).limit(limit)).all()


def queued_count(session: Session, *, at_most: int) -> int:
    """How many submissions wait to be graded, counted up to `at_most`."""
    query = select(Submission.id).where(Submission.status == QUEUED).limit(at_most)
    return len(session.scalars(query).all())


def claim(session: Session, *, submission_id: uuid.UUID, owner: str, now: datetime) -> int:
    """queued -> running for `owner`, counting the attempt."""
    result = session.execute(
        update(Submission)
        .where(Submission.id == submission_id, Submission.status == QUEUED)
        .values(
            status=RUNNING,
            attempts=Submission.attempts + 1,
            lease_owner=owner,
            heartbeat_at=now,
            started_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def mark_dispatched(
    session: Session, *, submission_id: uuid.UUID, queue: str, job_id: int | None, now: datetime
) -> int:
    result = session.execute(
        update(Submission)
        .where(Submission.id == submission_id, Submission.status == QUEUED)
        .values(queue=queue, queue_job_id=job_id, dispatched_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def mark_running(
    session: Session, *, submission_id: uuid.UUID, attempt: int, owner: str, now: datetime
) -> int:
    """A queue worker started (or restarted) the job: record its attempt and lease."""
    result = session.execute(
        update(Submission)
        .where(Submission.id == submission_id, Submission.status.in_(UNFINISHED))
        .values(
            status=RUNNING, attempts=attempt, lease_owner=owner, heartbeat_at=now, started_at=now
        )
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def heartbeat(session: Session, *, owner: str, now: datetime) -> int:
    result = session.execute(
        update(Submission)
        .where(Submission.status == RUNNING, Submission.lease_owner == owner)
        .values(heartbeat_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def running(session: Session) -> Sequence[Submission]:
    return session.scalars(select(Submission).where(Submission.status == RUNNING)).all()


def requeue(
    session: Session, *, submission_id: uuid.UUID, owner: str | None, redispatch: bool = True
) -> int:
    """running -> queued. `redispatch=False` when the queue itself retries the same job."""
    query = update(Submission).where(Submission.id == submission_id, Submission.status == RUNNING)
    if owner is not None:
        query = query.where(Submission.lease_owner == owner)
    values: dict[str, Any] = {"status": QUEUED, "lease_owner": None, "heartbeat_at": None}
    if redispatch:
        values["dispatched_at"] = None
    result = session.execute(query.values(**values).execution_options(synchronize_session=False))
    return int(result.rowcount)  # type: ignore[attr-defined]


def finish(
    session: Session,
    *,
    submission_id: uuid.UUID,
    status: str,
    result: dict[str, Any],
    owner: str | None,
    now: datetime | None = None,
) -> int:
    """An unfinished submission gets its Result. The first result wins; later ones are dropped."""
    query = update(Submission).where(
        Submission.id == submission_id, Submission.status.in_(UNFINISHED)
    )
    if owner is not None:
        query = query.where(Submission.lease_owner == owner)
    outcome = session.execute(
        query.values(
            status=status,
            result=result,
            verdict=str(result.get("status"))[:8],
            first_failed_check=first_failed_check(result),
            finished_at=now or utcnow(),
            lease_owner=None,
        ).execution_options(synchronize_session=False)
    )
    return int(outcome.rowcount)  # type: ignore[attr-defined]


def first_failed_check(result: dict[str, Any]) -> str | None:
    """The id of the first check, in the Result's order, that failed (instructor analytics)."""
    for check in result.get("checks") or []:
        if check.get("status") == "fail":
            return str(check.get("id"))[:64]
    return None


def get_draft(session: Session, *, user_id: uuid.UUID, exercise: str) -> Draft | None:
    return session.get(Draft, (user_id, exercise))


def put_draft(
    session: Session, *, user_id: uuid.UUID, exercise: str, code: str, now: datetime | None = None
) -> Draft:
    draft = get_draft(session, user_id=user_id, exercise=exercise)
    if draft is None:
        draft = Draft(user_id=user_id, exercise=exercise, code=code, updated_at=now or utcnow())
        session.add(draft)
    else:
        draft.code = code
        draft.updated_at = now or utcnow()
    session.flush()
    return draft


def claim_draft(
    session: Session,
    *,
    user_id: uuid.UUID,
    exercise: str,
    code: str,
    base: datetime,
    tolerance: timedelta,
) -> bool:
    """Compare-and-set: whether the stored draft is still the version saved at `base` (or holds
    `code` already), decided by the database in one conditional UPDATE that also locks the row
    for the rest of the transaction. A concurrent save from the same base waits on that lock and
    then finds the row changed (0 rows): it can never overwrite this one unseen."""
    base = as_utc(base)
    result = session.execute(
        update(Draft)
        .where(
            Draft.user_id == user_id,
            Draft.exercise == exercise,
            or_(
                Draft.updated_at.between(base - tolerance, base + tolerance),
                Draft.code == code,
            ),
        )
        .values(code=Draft.code)
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0) == 1)


def delete_draft(session: Session, *, user_id: uuid.UUID, exercise: str) -> None:
    draft = get_draft(session, user_id=user_id, exercise=exercise)
    if draft is not None:
        session.delete(draft)


def dispatched_unfinished(session: Session) -> list[tuple[uuid.UUID, int]]:
    """(submission id, queue job id) of submissions handed to the queue and not yet ended."""
    rows = session.execute(
        select(Submission.id, Submission.queue_job_id).where(
            Submission.status.in_(UNFINISHED), Submission.queue_job_id.is_not(None)
        )
    ).all()
    return [(row[0], int(row[1])) for row in rows if row[1] is not None]


def dispatched_job_ids_of(session: Session, user_id: uuid.UUID) -> list[int]:
    """The queue job ids of a learner's submissions handed to the queue and not yet ended."""
    rows = session.scalars(
        select(Submission.queue_job_id).where(
            Submission.user_id == user_id,
            Submission.status.in_(UNFINISHED),
            Submission.queue_job_id.is_not(None),
        )
    ).all()
    return [int(job_id) for job_id in rows if job_id is not None]
