"""Submitting code and reading it back: the rules, with no HTTP in sight. Never commits."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import as_utc, utcnow
from app.domain_events import Event, Kind, record
from app.submissions import pagination
from app.submissions import repository as repo
from app.submissions.errors import (
    CodeEmpty,
    CodeTooLarge,
    DraftConflict,
    DraftTooLarge,
    ExerciseNotFound,
    IdempotencyKeyReused,
    SubmissionNotFound,
    TooManyInFlight,
)
from app.submissions.exercises import SpecLookup, spec_from_content
from app.submissions.models import QUEUED, Draft, Submission, SubmissionEvent
from grader.contract import MAX_CODE_BYTES

KIB = 1024
DRAFT_TIME_TOLERANCE = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Submitted:
    submission: Submission
    created: bool  # False when an earlier request with the same Idempotency-Key made it


def check_code_size(code: str) -> None:
    size = len(code.encode("utf-8"))
    if size > MAX_CODE_BYTES:
        raise CodeTooLarge(size_kib=-(-size // KIB), limit_kib=MAX_CODE_BYTES // KIB)
    if not code.strip():
        raise CodeEmpty()


def submit(
    session: Session,
    *,
    user_id: uuid.UUID,
    exercise: str,
    code: str,
    locale: str = "en",
    idempotency_key: str | None = None,
    max_in_flight: int = 2,
    spec_for: SpecLookup = spec_from_content,
) -> Submitted:
    """Store a new queued submission, or return the one this Idempotency-Key already made."""
    if idempotency_key:
        earlier = repo.get_by_idempotency_key(session, user_id=user_id, key=idempotency_key)
        if earlier is not None:
            return Submitted(_same_or_conflict(earlier, exercise, code), created=False)
    check_code_size(code)
    if spec_for(exercise) is None:
        raise ExerciseNotFound(exercise=exercise)
    repo.lock_learner(session, user_id=user_id)  # count and insert as one step
    repo.lock_queue(session)  # then take a place in the queue after every earlier submission
    if repo.count_in_flight(session, user_id=user_id) >= max_in_flight:
        raise TooManyInFlight(count=max_in_flight)
    submission = Submission(
        user_id=user_id,
        exercise=exercise,
        code=code,
        locale=locale,
        idempotency_key=idempotency_key or None,
        status=QUEUED,
        attempts=0,
        created_at=utcnow(),  # under the queue's lock: after every earlier submission
    )
    try:
        with session.begin_nested():
            session.add(submission)
    except IntegrityError:
        # A concurrent request with the same key won the race: answer with its submission.
        assert idempotency_key
        earlier = repo.get_by_idempotency_key(session, user_id=user_id, key=idempotency_key)
        if earlier is None:
            raise
        return Submitted(_same_or_conflict(earlier, exercise, code), created=False)
    record(
        session, [Event(Kind.SUBMISSION, user_id, exercise, as_utc(submission.created_at).date())]
    )
    return Submitted(submission, created=True)


def _same_or_conflict(earlier: Submission, exercise: str, code: str) -> Submission:
    if earlier.exercise != exercise or earlier.code != code:
        raise IdempotencyKeyReused()
    return earlier


def get_for_learner(
    session: Session, *, user_id: uuid.UUID, submission_id: uuid.UUID
) -> Submission:
    """One of the learner's own submissions; someone else's is indistinguishable from none."""
    submission = repo.get_for_user(session, user_id=user_id, submission_id=submission_id)
    if submission is None:
        raise SubmissionNotFound()
    return submission


@dataclass(frozen=True)
class Page:
    submissions: list[Submission]
    next_cursor: str | None  # None on the last page


def list_for_learner(
    session: Session,
    *,
    user_id: uuid.UUID,
    exercise: str | None = None,
    limit: int = 20,
    cursor: str | None = None,
) -> Page:
    """A page of the learner's submissions, newest first; `cursor` continues a previous page."""
    before = pagination.decode(cursor) if cursor else None
    rows = list(
        repo.list_for_user(
            session, user_id=user_id, exercise=exercise, limit=limit + 1, before=before
        )
    )
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if rows else None
    next_cursor = pagination.encode(last.created_at, last.id) if more and last else None
    return Page(rows, next_cursor)


def queue_position(session: Session, submission: Submission) -> int | None:
    if submission.status != QUEUED:
        return None
    return repo.queue_position(session, submission)


def events_after(
    session: Session, *, submission_id: uuid.UUID, after_id: int, limit: int = 500
) -> list[SubmissionEvent]:
    return list(
        repo.events_after(session, submission_id=submission_id, after_id=after_id, limit=limit)
    )


def event_payload(event: SubmissionEvent) -> dict[str, Any]:
    """What one stored event looks like on the wire (the SSE `data` field)."""
    payload: dict[str, Any] = {"attempt": event.attempt, **event.data}
    if event.rank is not None:
        payload["rank"] = event.rank
    return payload


def get_draft(session: Session, *, user_id: uuid.UUID, exercise: str) -> Draft | None:
    return repo.get_draft(session, user_id=user_id, exercise=exercise)


def save_draft(
    session: Session,
    *,
    user_id: uuid.UUID,
    exercise: str,
    code: str,
    base_updated_at: datetime | None = None,
    spec_for: SpecLookup = spec_from_content,
) -> Draft:
    """Save the draft; with `base_updated_at`, only when the stored draft is still that one (or
    already holds this code): another device's edits are never overwritten unseen."""
    if len(code.encode("utf-8")) > MAX_CODE_BYTES:
        raise DraftTooLarge(limit_kib=MAX_CODE_BYTES // KIB)
    if spec_for(exercise) is None:
        raise ExerciseNotFound(exercise=exercise)
    if base_updated_at is not None and not repo.claim_draft(
        session,
        user_id=user_id,
        exercise=exercise,
        code=code,
        base=base_updated_at,
        tolerance=DRAFT_TIME_TOLERANCE,
    ):
        stored = repo.get_draft(session, user_id=user_id, exercise=exercise)
        if stored is not None:  # changed since the base: both versions go back to the editor
            raise DraftConflict(stored=stored, code=code)
    stored = repo.get_draft(session, user_id=user_id, exercise=exercise)
    now = utcnow()
    if stored is not None and as_utc(stored.updated_at).date() == now.date():
        return repo.put_draft(session, user_id=user_id, exercise=exercise, code=code, now=now)
    # A new draft, or its first save of the day: the day it was last saved changes.
    draft = repo.put_draft(session, user_id=user_id, exercise=exercise, code=code, now=now)
    record(session, [Event(Kind.DRAFT, user_id, exercise)])
    return draft


def delete_draft(session: Session, *, user_id: uuid.UUID, exercise: str) -> None:
    repo.delete_draft(session, user_id=user_id, exercise=exercise)
    record(session, [Event(Kind.DRAFT, user_id, exercise)])


def queued_job_ids(session: Session, user_id: uuid.UUID) -> list[int]:
    """A learner's jobs in the grading queue (to withdraw when the account is deleted)."""
    return repo.dispatched_job_ids_of(session, user_id)
