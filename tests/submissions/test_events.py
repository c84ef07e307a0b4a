"""Live events over Server-Sent Events: order, ids, resume with Last-Event-ID (both DBs)."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.auth.models import User
from app.submissions import jobs, service
from grader.queue_protocol import worker_lost
from tests.submissions.fakes import fake_result

pytestmark = pytest.mark.usefixtures("stream_sessions")


def parse_sse(text: str) -> list[dict[str, object]]:
    events = []
    for block in text.split("\n\n"):
        fields: dict[str, object] = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            fields[name] = value.strip()
        if "event" in fields:
            fields["data"] = json.loads(str(fields["data"]))
            events.append(fields)
    return events


def graded_submission(session: Session, learner: User) -> uuid.UUID:
    """A submission that went through the whole lifecycle, with its events stored."""
    submitted = service.submit(
        session, user_id=learner.id, exercise="ddp-fundamentals/train", code="print(1)\n"
    )
    session.flush()
    claimed = jobs.claim(session, submitted.submission.id, "test-host:1:abc")
    assert claimed is not None
    jobs.record_events(
        session,
        claimed.id,
        1,
        [
            {"kind": "status", "data": {"status": "starting"}},
            {"kind": "output", "rank": 0, "data": {"line": "rank 0 epoch 0"}},
            {"kind": "output", "rank": 1, "data": {"line": "rank 1 epoch 0"}},
            {"kind": "check", "data": {"id": "run.completed", "status": "pass", "title": "T"}},
            {"kind": "done", "data": {"ignored": True}},  # the grader's own; ours comes last
        ],
    )
    assert jobs.complete(session, claimed.id, fake_result("pass"), attempt=1, owner=None)
    session.flush()
    return claimed.id


def test_stream_replays_every_event_in_order_and_ends_with_done(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    submission_id = graded_submission(session, learner)
    response = client.get(f"/api/v1/submissions/{submission_id}/events", headers=auth)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    kinds = [event["event"] for event in events]
    assert kinds == ["status", "output", "output", "check", "done"]
    ids = [int(str(event["id"])) for event in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert events[1]["data"] == {"attempt": 1, "rank": 0, "line": "rank 0 epoch 0"}
    done = events[-1]["data"]
    assert isinstance(done, dict)
    assert done["status"] == "done"
    assert done["result"]["status"] == "pass"


def test_reconnect_with_last_event_id_resumes_without_losing_lines(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    submission_id = graded_submission(session, learner)
    url = f"/api/v1/submissions/{submission_id}/events"
    everything = parse_sse(client.get(url, headers=auth).text)
    seen_until = str(everything[1]["id"])  # the browser saw status and rank 0's line, then dropped
    resumed = parse_sse(client.get(url, headers={**auth, "Last-Event-ID": seen_until}).text)
    assert [event["id"] for event in resumed] == [event["id"] for event in everything[2:]]


def test_a_queued_submission_streams_its_position(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    exercise = "ddp-fundamentals/train"
    first = service.submit(session, user_id=learner.id, exercise=exercise, code="a")
    second = service.submit(session, user_id=learner.id, exercise=exercise, code="b")
    session.flush()
    # End the first so the second's stream can finish after announcing its position.
    assert jobs.fail_for_platform(session, first.submission, "stop")
    url = f"/api/v1/submissions/{second.submission.id}/events"
    with client.stream("GET", url, headers=auth) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                assert json.loads(line[5:]) == {"position": 1, "attempt": 0}
                break


def test_a_graded_attempt_reaches_the_learners_progress(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    graded_submission(session, learner)
    progress = client.get("/api/v1/progress", headers=auth)
    assert progress.status_code == 200, progress.text
    lesson = progress.json()["lessons"]["ddp-fundamentals"]
    assert "ddp-fundamentals/train" in str(lesson["exercises"])


def test_platform_errors_are_stored_untranslated_with_their_id(
    session: Session, learner: User
) -> None:
    """Never in the submitter's language: each reader renders it in theirs."""
    submitted = service.submit(
        session, user_id=learner.id, exercise="ddp-fundamentals/train", code="x", locale="tr"
    )
    session.flush()
    lost = worker_lost(2)
    assert jobs.fail_for_platform(session, submitted.submission, lost)
    session.refresh(submitted.submission)
    result = submitted.submission.result or {}
    assert result["error"] == str(lost)
    assert (result["error_id"], result["error_params"]) == ("platform.worker_lost", {"attempts": 2})


def test_an_open_stream_ends_when_its_token_is_revoked(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    from app.auth import service as auth_service
    from app.auth.models import DeviceToken

    queued = service.submit(
        session, user_id=learner.id, exercise="ddp-fundamentals/train", code="a"
    )
    session.flush()
    url = f"/api/v1/submissions/{queued.submission.id}/events"
    kinds: list[str] = []
    with client.stream("GET", url, headers=auth) as response:
        for line in response.iter_lines():
            if line.startswith("event:"):
                kinds.append(line.partition(":")[2].strip())
                if kinds == ["queued"]:  # the stream is open: now sign this device out
                    for device in session.query(DeviceToken).filter_by(user_id=learner.id):
                        auth_service.revoke(device)
                    session.flush()
    assert kinds == ["queued", "signed_out"]


def test_a_queued_submissions_stream_looks_less_often_the_longer_it_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every quiet look at a queued submission waits 1.5 times longer (up to QUEUED_POLL_MAX_S);
    a new queue position or running again looks every `poll_seconds`."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from app.submissions import sse

    looks = iter(
        [sse.Snapshot(True, "queued", 5, None, 0, [])] * 8
        + [sse.Snapshot(True, "queued", 4, None, 0, [])]
        + [sse.Snapshot(True, "running", None, None, 1, [(1, "status", {"status": "running"})])]
        + [sse.Snapshot(True, "running", None, None, 1, [])]
        + [sse.Snapshot(True, "done", None, None, 1, [(2, "done", {"status": "pass"})])]
    )
    monkeypatch.setattr(sse, "_snapshot", lambda *args: next(looks))
    delays: list[float] = []

    async def no_wait(seconds: float) -> None:
        delays.append(round(seconds, 3))

    monkeypatch.setattr(sse.asyncio, "sleep", no_wait)

    async def follow() -> list[str]:
        return [chunk async for chunk in sse.stream(lambda: None, uuid.uuid4())]  # type: ignore[arg-type, return-value]

    with ThreadPoolExecutor(1) as thread:  # a loop of its own: an earlier test may leave one set
        thread.submit(asyncio.run, follow()).result()
    assert delays[:8] == [0.2, 0.3, 0.45, 0.675, 1.013, 1.519, 2.0, 2.0]
    assert delays[8:] == [0.2, 0.2, 0.2]  # a new position, then running: every poll_seconds
