"""Server-Sent Events for one submission, replayed from the submission_events table.

Each stored event goes out with its row id as the SSE `id`, so a browser that reconnects with
`Last-Event-ID` gets exactly the events it missed. `queued` events (the queue position) are
computed live and carry no id. The stream ends after `done`, or with `signed_out` as soon as the
token it was opened with is revoked (checked at every poll), a deleted account's too. A
submission still queued is looked at less often the longer it waits (QUEUED_POLL_MAX_S).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.db import SessionFactory
from app.submissions import repository as repo
from app.submissions import service
from app.submissions.models import QUEUED, SubmissionEvent

RETRY_MS = 1000
GONE = "gone"  # a Snapshot's status when the submission was deleted (its account was)
KEEPALIVE_SECONDS = 15.0
# While a submission waits in the queue its stream looks less and less often (x1.5 per quiet
# look, up to this): 20 learners' streams polling every 0.2 s took a fair share of the CPU the
# gradings they wait for need. Running, every `poll_seconds`.
QUEUED_POLL_MAX_S = 2.0


@dataclass
class Snapshot:
    signed_in: bool
    status: str
    position: int | None
    result: dict[str, Any] | None
    attempts: int
    events: list[tuple[int, str, dict[str, Any]]]


def format_event(kind: str, data: dict[str, Any], event_id: int | None = None) -> str:
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines.append(f"event: {kind}")
    lines.append("data: " + json.dumps(data, separators=(",", ":"), ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


def parse_last_event_id(value: str | None) -> int:
    try:
        return max(0, int(value)) if value else 0
    except ValueError:
        return 0


def _snapshot(
    session_factory: SessionFactory,
    submission_id: uuid.UUID,
    after: int,
    signed_in: Callable[[Session], bool],
) -> Snapshot:
    with session_factory() as session:
        submission = repo.get(session, submission_id)
        if submission is None:  # deleted with its account while the stream was open
            return Snapshot(signed_in(session), GONE, None, None, 0, [])
        session.refresh(submission)
        events: list[SubmissionEvent] = service.events_after(
            session, submission_id=submission_id, after_id=after
        )
        return Snapshot(
            signed_in=signed_in(session),
            status=submission.status,
            position=service.queue_position(session, submission),
            result=submission.result,
            attempts=submission.attempts,
            events=[(e.id, e.kind, service.event_payload(e)) for e in events],
        )


async def stream(
    session_factory: SessionFactory,
    submission_id: uuid.UUID,
    *,
    last_event_id: int = 0,
    is_disconnected: Callable[[], Any] | None = None,
    signed_in: Callable[[Session], bool] = lambda _session: True,
    poll_seconds: float = 0.2,
    render: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
) -> AsyncIterator[str]:
    """The events after `last_event_id`; `render(kind, data)` adapts each payload (the viewer's
    language) before it is sent."""
    shown = render or (lambda _kind, data: data)
    yield f"retry: {RETRY_MS}\n\n"
    after = last_event_id
    last_position: int | None = None
    last_sent = time.monotonic()
    delay = poll_seconds
    while True:
        snap = await asyncio.to_thread(_snapshot, session_factory, submission_id, after, signed_in)
        if not snap.signed_in:
            yield format_event("signed_out", {"message": "This device was signed out."})
            return
        if snap.status == GONE:  # the submission no longer exists: end the stream cleanly
            return
        quiet = snap.status == QUEUED and not snap.events
        if snap.status == QUEUED and snap.position is not None and snap.position != last_position:
            quiet = False
            last_position = snap.position
            yield format_event("queued", {"position": snap.position, "attempt": snap.attempts})
            last_sent = time.monotonic()
        for event_id, kind, data in snap.events:
            after = event_id
            yield format_event(kind, shown(kind, data), event_id)
            last_sent = time.monotonic()
            if kind == "done":
                return
        if not snap.events and snap.status not in ("queued", "running"):
            # Ended without a stored `done` (should not happen): say so from the row itself.
            yield format_event(
                "done", shown("done", {"status": snap.status, "result": snap.result})
            )
            return
        if is_disconnected is not None and await is_disconnected():
            return
        if time.monotonic() - last_sent > KEEPALIVE_SECONDS:
            yield ": keep-alive\n\n"
            last_sent = time.monotonic()
        delay = min(max(QUEUED_POLL_MAX_S, poll_seconds), delay * 1.5) if quiet else poll_seconds
        await asyncio.sleep(delay)
