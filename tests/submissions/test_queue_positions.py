"""Queue positions strictly increase, in the order the queue hands submissions out, even for
submissions made at the same instant (both databases)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.auth.models import User
from app.submissions import repository as repo
from app.submissions.models import Submission


def test_simultaneous_submissions_get_distinct_increasing_positions(
    session: Session, learner: User
) -> None:
    instant = datetime(2026, 12, 3, 9, 0, 0, tzinfo=UTC)
    made = [
        Submission(
            user_id=learner.id, exercise="ddp-fundamentals/train", code="x", created_at=instant
        )
        for _ in range(6)
    ]
    session.add_all(made)
    session.flush()
    order = repo.next_queued(session, limit=100, undispatched_only=False)
    ours = [submission for submission in order if submission in made]
    positions = [repo.queue_position(session, submission) for submission in ours]
    assert len(ours) == 6
    assert positions == sorted(set(positions))  # strictly increasing, in the queue's order
    assert positions[-1] - positions[0] == 5


def test_concurrent_submissions_get_unique_increasing_positions(
    committing_engine: Engine,
) -> None:
    """Issue 39, N16: twenty submissions at once (no grader taking any) each counted only the
    committed ones ahead of it: 3, 3, 4, 6, 6, 6, 6 ... Each takes its place in turn now."""
    import threading
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import delete

    from app.submissions import service
    from tests.auth.factories import create_user

    with Session(committing_engine, expire_on_commit=False) as session, session.begin():
        learners = [
            create_user(session, email=f"n16-{uuid.uuid4().hex}@example.org").id for _ in range(5)
        ]
    start = threading.Barrier(10)

    def submit(learner: uuid.UUID) -> tuple[datetime, int]:
        with Session(committing_engine, expire_on_commit=False) as session:
            start.wait()
            with session.begin():
                made = service.submit(
                    session, user_id=learner, exercise="ddp-fundamentals/train", code="x = 1\n"
                ).submission
                return made.created_at, service.queue_position(session, made) or 0

    try:
        with ThreadPoolExecutor(10) as pool:
            got = sorted(pool.map(submit, learners * 2))
        positions = [position for _, position in got]
        assert len(set(positions)) == len(positions), positions
        assert positions == sorted(positions), positions
    finally:
        with Session(committing_engine) as session, session.begin():
            session.execute(delete(User).where(User.id.in_(learners)))
