"""The per-learner in-flight limit holds under simultaneous submissions (real connections, each
committing, on SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
import uuid

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.submissions import service
from app.submissions.errors import TooManyInFlight
from app.submissions.models import Submission

ATTEMPTS = 10
LIMIT = 2


def test_ten_simultaneous_submissions_accept_at_most_the_limit(
    committing_engine: Engine, committed_learner_id: uuid.UUID
) -> None:
    engine, learner_id = committing_engine, committed_learner_id
    barrier = threading.Barrier(ATTEMPTS)
    accepted: list[uuid.UUID] = []
    refused: list[TooManyInFlight] = []
    errors: list[BaseException] = []

    def attempt(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            with Session(engine) as session, session.begin():
                submitted = service.submit(
                    session,
                    user_id=learner_id,
                    exercise="ddp-fundamentals/train",
                    code=f"print({index})\n",
                    max_in_flight=LIMIT,
                    spec_for=lambda _exercise: object(),  # type: ignore[arg-type,return-value]
                )
                accepted.append(submitted.submission.id)
        except TooManyInFlight as exc:
            refused.append(exc)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(ATTEMPTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(accepted) == LIMIT and len(refused) == ATTEMPTS - LIMIT
    with Session(engine) as session:
        stored = session.scalar(
            select(func.count()).select_from(Submission).where(Submission.user_id == learner_id)
        )
    assert stored == LIMIT
