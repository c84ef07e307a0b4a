"""The analytics consumer as a procrastinate task (RDV_ANALYTICS_CONSUMER=queue, real PostgreSQL):
a commit that recorded domain events defers a job for their partition, the app's analytics
worker runs it, and the events are applied and gone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.analytics.models import AttemptDay
from app.analytics.queue import QueueConsumer
from app.domain_events import Event, Kind, record, subscribe
from app.domain_events.models import DomainEvent
from app.submissions.models import QUEUED, Submission
from tests.auth.factories import create_user
from tests.submissions.conftest import drop_database, fresh_database_url
from tests.submissions.helpers import SessionFactory, make_uow
from tests.submissions.queue_fixtures import conninfo

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[tuple[str, SessionFactory]]:
    url = fresh_database_url("postgres", tmp_path)
    uow, dispose = make_uow(url)
    yield url, uow
    dispose()
    drop_database(url)


def test_a_committed_event_is_applied_by_the_analytics_task(
    pg: tuple[str, SessionFactory],
) -> None:
    url, uow = pg
    consumer = QueueConsumer(uow, conninfo=conninfo(url), poll_seconds=30)
    unsubscribe = subscribe(consumer.notify)
    consumer.start()
    try:
        at = datetime(2026, 11, 20, 9, tzinfo=UTC)
        with uow() as session:
            user = create_user(session, email="q@example.org", name="Q")
            session.add(
                Submission(
                    user_id=user.id, exercise="a/b", code="#", locale="en", status=QUEUED,
                    created_at=at,
                )
            )  # fmt: skip
            session.flush()
            record(session, [Event(Kind.SUBMISSION, user.id, "a/b", at.date())])
        deadline = time.monotonic() + 60
        while True:
            with uow() as session:
                left = session.scalar(select(func.count()).select_from(DomainEvent))
                counted = session.scalar(
                    select(AttemptDay.submissions).where(
                        AttemptDay.user_id == user.id, AttemptDay.locale == "*"
                    )
                )
            if left == 0 and counted is not None:
                break
            assert time.monotonic() < deadline, "the analytics task never applied the event"
            time.sleep(0.1)
        assert counted == 1
    finally:
        unsubscribe()
        consumer.stop()
