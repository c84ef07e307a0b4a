"""The analytics consumer applies the domain events after their commit (both databases): a
consumer killed in the middle of a batch (SIGKILL: its transaction never commits) leaves the
events to the next one, and nothing is counted twice or lost; an event applied twice counts
once; the page says how old its figures are; a commit's actions run once after it, a
rollback's never."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter
from sqlalchemy import delete, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.analytics import consumer, rollups
from app.analytics.models import AttemptDay, StepDay
from app.config import REPO_ROOT
from app.db import after_commit
from app.domain_events import Event, Kind, partition_of, record, subscribe
from app.domain_events.models import DomainEvent
from app.learning import service as learning
from app.learning.schemas import ProgressEventIn
from app.submissions import jobs
from app.submissions import service as submissions
from tests.analytics.conftest import EXERCISE, LESSON, _result
from tests.analytics.test_report import instructor_auth
from tests.analytics.test_rollups import rows
from tests.content.conftest import FIXTURE_LESSONS

__all__ = ["instructor_auth"]

_events = TypeAdapter(list[ProgressEventIn])

# Applies the events of every partition, and stops for good in the middle of the batch that
# holds the learner's submissions: after their progress is recomputed (written, uncommitted).
STUCK_CONSUMER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from sqlalchemy.orm import sessionmaker
    from app.analytics import consumer, rollups
    from app.db import make_engine

    real = rollups.refresh_attempts

    def stuck(*args, **kwargs):
        real(*args, **kwargs)
        Path(sys.argv[2]).touch()
        time.sleep(300)

    rollups.refresh_attempts = stuck
    consumer.ThreadConsumer(sessionmaker(make_engine(sys.argv[1])).begin).run_once()
    """
)


@pytest.fixture
def learner(
    committing_engine: Engine, committed_learner_id: uuid.UUID, use_lessons: Callable[..., Any]
) -> Iterator[uuid.UUID]:
    """A committed learner with three steps synced and a submission made and graded, each in
    a transaction of its own; their analytics rows are taken off after the test."""
    use_lessons(FIXTURE_LESSONS)
    user_id = committed_learner_id
    maker = sessionmaker(committing_engine, expire_on_commit=False)
    at = datetime(2026, 11, 20, 9, tzinfo=UTC)
    sent = [
        {"id": uuid.uuid4().hex, "type": "position", "lesson_id": LESSON, "step_id": step,
         "at": (at + timedelta(seconds=n)).isoformat()}
        for n, step in enumerate(("one", "two", "three"))
    ]  # fmt: skip
    with maker.begin() as session:
        learning.sync(session, user_id, _events.validate_python(sent), locale="en")
    with maker.begin() as session:
        made = submissions.submit(session, user_id=user_id, exercise=EXERCISE, code="print(1)")
    with maker.begin() as session:
        assert jobs.complete(
            session, made.submission.id, _result("pass", None), attempt=1, owner=None
        )
    yield user_id
    with maker.begin() as session:
        session.execute(delete(DomainEvent).where(DomainEvent.user_id == user_id))
        rollups.forget_learner(session, user_id)


def pending(engine: Engine, user_id: uuid.UUID) -> int:
    with Session(engine) as session:
        query = select(func.count()).where(DomainEvent.user_id == user_id)
        return int(session.scalar(query) or 0)


def counted(engine: Engine, user_id: uuid.UUID) -> tuple[int, int]:
    """(the learner's steps reached, their submissions counted), in the totals."""
    with Session(engine) as session:
        mine = (StepDay.user_id == user_id, StepDay.locale == "*")
        steps = session.scalar(select(func.count()).where(*mine))
        made = session.scalar(
            select(func.sum(AttemptDay.submissions)).where(
                AttemptDay.user_id == user_id, AttemptDay.locale == "*"
            )
        )
        return int(steps or 0), int(made or 0)


def test_a_consumer_killed_mid_batch_counts_nothing_twice_and_loses_nothing(
    committing_engine: Engine, learner: uuid.UUID, tmp_path: Path
) -> None:
    assert pending(committing_engine, learner) == 3  # one sync, a submission made and graded
    stuck = tmp_path / "stuck"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            STUCK_CONSUMER,
            str(committing_engine.url.render_as_string(False)),
            str(stuck),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "RDV_ENVIRONMENT": "test"},
    )
    try:
        deadline = time.monotonic() + 60
        while not stuck.exists() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stuck.exists(), "the consumer never reached the learner's submissions"
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(30)
    # Killed with its batch half-applied: nothing of it stayed, every event is still there.
    assert counted(committing_engine, learner) == (0, 0)
    assert pending(committing_engine, learner) == 3

    ThreadConsumer = consumer.ThreadConsumer
    maker = sessionmaker(committing_engine, expire_on_commit=False)
    while ThreadConsumer(maker.begin).run_once():
        pass
    assert pending(committing_engine, learner) == 0
    assert counted(committing_engine, learner) == (3, 1)  # three steps; one submission, once

    # The same events applied again (a consumer that died after applying, before deleting).
    with maker.begin() as session:
        record(session, [Event(Kind.PROGRESS, learner, LESSON, datetime(2026, 11, 20).date())])
        record(session, [Event(Kind.SUBMISSION, learner, EXERCISE, datetime.now(UTC).date())])
    while ThreadConsumer(maker.begin).run_once():
        pass
    assert counted(committing_engine, learner) == (3, 1)

    # What was kept incrementally equals a rebuild from the source rows.
    with Session(committing_engine) as session:
        kept = rows(session)
        rollups.rebuild(session)
        assert rows(session) == kept
        session.rollback()


def test_the_page_says_how_old_its_figures_are(
    client: TestClient, session: Session, instructor_auth: dict[str, str], use_lessons: Any
) -> None:
    use_lessons(FIXTURE_LESSONS)

    def page(language: str) -> str:
        answer = client.get(
            "/instructor/analytics",
            params={"lesson_id": LESSON},
            headers={**instructor_auth, "Accept-Language": language},
        )
        assert answer.status_code == 200
        return answer.text

    consumer.drain(session)
    assert "Figures are up to date." in page("en")
    user_id = uuid.uuid4()
    session.add(
        DomainEvent(
            kind=str(Kind.PROGRESS),
            user_id=user_id,
            subject=LESSON,
            day=datetime(2026, 11, 20).date(),
            partition=partition_of(user_id),
            recorded_at=datetime.now(UTC) - timedelta(seconds=12),
        )
    )
    session.flush()
    assert re.search(r"Figures as of 1[23] s ago", page("en"))
    assert re.search(r"Rakamlar 1[23] sn öncesine ait", page("tr"))
    assert re.search(r"Números de 1[23] s atrás", page("pt-BR"))
    consumer.drain(session)
    assert "Figures are up to date." in page("en")


def test_actions_run_once_after_the_commit_and_never_after_a_rollback(
    committing_engine: Engine,
) -> None:
    ran: list[str] = []
    heard: list[frozenset[int]] = []
    unsubscribe = subscribe(heard.append)
    user_id = uuid.uuid4()
    try:
        with Session(committing_engine) as session:
            with session.begin():
                after_commit(session, lambda: ran.append("first"), key="wake")
                after_commit(session, lambda: ran.append("second"), key="wake")  # the same key
                record(session, [Event(Kind.ACCOUNT_DELETED, user_id)])
                assert (ran, heard) == ([], [])
            assert ran == ["first"]
            assert heard == [frozenset({partition_of(user_id)})]
            with pytest.raises(RuntimeError), session.begin():
                after_commit(session, lambda: ran.append("rolled back"))
                record(session, [Event(Kind.ACCOUNT_DELETED, user_id)])
                raise RuntimeError
            with session.begin():
                pass
            assert ran == ["first"]
            assert len(heard) == 1
    finally:
        unsubscribe()
        with Session(committing_engine) as session, session.begin():
            session.execute(delete(DomainEvent).where(DomainEvent.user_id == user_id))
