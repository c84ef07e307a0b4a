"""Queue positions strictly increase, in the order the queue hands submissions out, even for
submissions made at the same instant (both databases)."""

from __future__ import annotations

from datetime import UTC, datetime

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
