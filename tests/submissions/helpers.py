"""Small helpers shared by the backend tests (committed databases, waiting on a submission)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from app.db import make_engine
from app.submissions import service
from app.submissions.exercises import SpecLookup, spec_from_content
from app.submissions.models import Submission, SubmissionEvent
from tests.auth.factories import create_user

SessionFactory = Callable[[], AbstractContextManager[Session]]
EXERCISE = "ddp-fundamentals/train"


def make_uow(url: str) -> tuple[SessionFactory, Callable[[], None]]:
    """A unit_of_work() bound to `url`, and a function that disposes of its engine."""
    engine = make_engine(url)
    maker = sessionmaker(bind=engine, expire_on_commit=False)

    @contextmanager
    def unit_of_work() -> Iterator[Session]:
        session = maker()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    return unit_of_work, engine.dispose


def new_submission(
    uow: SessionFactory, code: str = "print(1)\n", *, spec_for: SpecLookup | None = None
) -> uuid.UUID:
    with uow() as session:
        user = create_user(session)
        submitted = service.submit(
            session,
            user_id=user.id,
            exercise=EXERCISE,
            code=code,
            max_in_flight=10,
            spec_for=spec_for or spec_from_content,
        )
        session.flush()
        return submitted.submission.id


def wait_for(
    uow: SessionFactory,
    submission_id: uuid.UUID,
    *statuses: str,
    timeout: float = 300,
    poll: float = 0.05,
) -> Submission:
    """Wait until the submission reaches one of `statuses` (timeout: a hang guard only)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with uow() as session:
            submission = session.get(Submission, submission_id)
            assert submission is not None
            if submission.status in statuses:
                return submission
        time.sleep(poll)
    raise AssertionError(
        f"submission {submission_id} never reached {statuses}:\n{describe(uow, submission_id)}"
    )


def describe(uow: SessionFactory, submission_id: uuid.UUID) -> str:
    """The submission, its last events and the queue's jobs: what a failed wait needs to show."""
    lines = []
    with uow() as session:
        row = session.get(Submission, submission_id)
        if row is not None:
            lines.append(f"status={row.status} attempts={row.attempts} owner={row.lease_owner}")
        if session.bind is not None and session.bind.dialect.name == "postgresql":
            jobs = (
                session.execute(
                    text(
                        "SELECT id, task_name, status, queue_name, attempts FROM procrastinate_jobs"
                        " WHERE task_name <> 'rendezvous.retry_stalled' ORDER BY id"
                    )
                ).all()
                if session.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar()
                else []
            )
            lines += [f"job {tuple(job)}" for job in jobs]
    events = stored_events(uow, submission_id)
    lines += [
        f"event {e.id} {e.kind} a{e.attempt} r{e.rank} {str(e.data)[:80]}" for e in events[-15:]
    ]
    return "\n".join(lines)


def stored_events(uow: SessionFactory, submission_id: uuid.UUID) -> list[SubmissionEvent]:
    with uow() as session:
        return list(
            session.scalars(
                select(SubmissionEvent)
                .where(SubmissionEvent.submission_id == submission_id)
                .order_by(SubmissionEvent.id)
            )
        )


def wait_for_event(
    uow: SessionFactory, submission_id: uuid.UUID, kind: str, timeout: float = 300
) -> SubmissionEvent:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in stored_events(uow, submission_id):
            if event.kind == kind:
                return event
        time.sleep(0.05)
    raise AssertionError(f"no {kind} event for {submission_id}")
