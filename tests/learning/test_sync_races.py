"""Concurrent syncs of one learner on real connections, each committing: no duplicate events,
no lost updates, cursors in commit order."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.content import service as content
from app.learning import service
from app.learning.models import ProgressEvent
from app.learning.schemas import ProgressEventIn

LESSON = "ddp-fundamentals"
THREADS = 6
_events = TypeAdapter(list[ProgressEventIn])


def _run_concurrently(engine: Engine, batches: list[list[dict[str, Any]]], user_id: uuid.UUID):
    barrier = threading.Barrier(len(batches))
    errors: list[BaseException] = []

    def worker(batch: list[dict[str, Any]]) -> None:
        try:
            events = _events.validate_python(batch)
            barrier.wait(timeout=30)
            with Session(engine) as session, session.begin():
                service.sync(session, user_id, events)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors


def _event(event_id: str, step_id: str, seconds: int) -> dict[str, Any]:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    return {
        "id": event_id,
        "type": "step_completed",
        "lesson_id": LESSON,
        "step_id": step_id,
        "at": at.isoformat(),
    }


def test_racing_duplicates_are_stored_once(
    committing_engine: Engine, committed_learner_id: uuid.UUID
) -> None:
    engine, learner_id = committing_engine, committed_learner_id
    steps = [s.id for s in content.localized_lesson(LESSON).steps]
    batch = [_event("dup-1", steps[0], 1), _event("dup-2", steps[1], 2)]
    _run_concurrently(engine, [batch] * THREADS, learner_id)
    with Session(engine) as session:
        count = session.scalar(
            select(func.count())
            .select_from(ProgressEvent)
            .where(ProgressEvent.user_id == learner_id)
        )
        state = service.changes_since(session, learner_id, None)
    assert count == 2
    assert state.lessons[LESSON].completed_steps == sorted(steps[:2])
    assert state.cursor == 1  # one change, however many retries raced


def test_racing_different_events_lose_nothing(
    committing_engine: Engine, committed_learner_id: uuid.UUID
) -> None:
    engine, learner_id = committing_engine, committed_learner_id
    steps = [s.id for s in content.localized_lesson(LESSON).steps]
    batches = [[_event(f"dev{i}-1", steps[i], i)] for i in range(THREADS)]
    _run_concurrently(engine, batches, learner_id)
    with Session(engine) as session:
        state = service.changes_since(session, learner_id, None)
    assert state.lessons[LESSON].completed_steps == sorted(steps[:THREADS])
    assert state.cursor == THREADS  # every sync got its own cursor value
