"""A platform error reads in the reader's language whichever path wrote it: the production
queue (the stalled-job policy's `worker_lost`, the web sweep's `queue_gave_up`) and the local
backend (`reclaim_stale`) store message ids with parameters, never a pre-translated text, and the
API, the live events and the page render them per reader (both DBs)."""

from __future__ import annotations

import uuid
from contextlib import nullcontext

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.auth.models import User
from app.i18n import SUPPORTED_LOCALES
from app.submissions import jobs, service
from app.submissions.queue import ResultStore
from grader import queue_protocol as protocol
from grader.contract import Result
from grader.i18n import catalog
from tests.submissions.test_events import parse_sse

pytestmark = pytest.mark.usefixtures("stream_sessions")
EXERCISE = "ddp-fundamentals/train"
TURKISH = "Değerlendirme makinesi programınızı çalıştırırken durdu (2 deneme)"
PORTUGUESE = "A máquina de avaliação parou enquanto executava seu programa (2 tentativas)"
ENGLISH = "The grading machine stopped while running your program (2 attempts)"


def lost_on_the_queue(session: Session, learner: User, submitted_in: str) -> uuid.UUID:
    """A submission the queue's stalled-job policy ended: the very payload
    `protocol.recover_stalled_grades` defers, applied by the web side's RESULT_TASK handler."""
    submitted = service.submit(
        session, user_id=learner.id, exercise=EXERCISE, code="print(1)\n", locale=submitted_in
    )
    session.flush()
    claimed = jobs.claim(session, submitted.submission.id, "worker-host:1:abc")
    assert claimed is not None
    lost = Result.platform_error(protocol.worker_lost(2))
    payload = protocol.result_payload(str(claimed.id), 2, lost)
    ResultStore(lambda: nullcontext(session)).result(**payload)
    session.flush()
    session.expire_all()
    return claimed.id


def test_the_worker_lost_error_is_stored_as_an_id_not_a_translation(
    session: Session, learner: User
) -> None:
    submission_id = lost_on_the_queue(session, learner, submitted_in="tr")
    stored = service.get_for_learner(session, user_id=learner.id, submission_id=submission_id)
    assert stored.status == "error" and stored.result is not None
    assert stored.result["error_id"] == "platform.worker_lost"
    assert stored.result["error_params"] == {"attempts": 2}
    assert stored.result["error"].startswith(ENGLISH)  # the record: English, whoever submitted


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ({"cookies": {"rdv_locale": "tr"}}, TURKISH),
        ({"headers": {"Accept-Language": "pt-BR,pt;q=0.9"}}, PORTUGUESE),
        ({"params": {"locale": "pt-BR"}, "cookies": {"rdv_locale": "tr"}}, PORTUGUESE),
        ({}, ENGLISH),
    ],
)
def test_a_queue_platform_error_reaches_each_reader_in_their_language(
    client: TestClient,
    auth: dict[str, str],
    session: Session,
    learner: User,
    how: dict[str, dict[str, str]],
    expected: str,
) -> None:
    submission_id = lost_on_the_queue(session, learner, submitted_in="en")
    headers = {**auth, **how.get("headers", {})}
    client.cookies.clear()
    for name, value in how.get("cookies", {}).items():
        client.cookies.set(name, value)
    params = how.get("params")
    url = f"/api/v1/submissions/{submission_id}"
    answer = client.get(url, headers=headers, params=params)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["error"].startswith(expected)
    locale = answer.headers["content-language"]
    assert answer.json()["result"]["summary"] == (
        catalog(locale).get("platform.failed") or "The grader failed; this does not count."
    )
    # The live events (what the page's exercise card shows while and after grading).
    events = parse_sse(client.get(f"{url}/events", headers=headers, params=params).text)
    done = next(event["data"] for event in events if event["event"] == "done")
    assert isinstance(done, dict) and done["result"]["error"].startswith(expected)
    # The page the reader is on is in the same language, which its script passes on as ?locale=.
    page = client.get("/", headers=how.get("headers"), params=params)
    assert page.headers["content-language"] == locale
    client.cookies.clear()


@pytest.mark.parametrize("locale", [loc for loc in SUPPORTED_LOCALES if loc != "en"])
def test_every_platform_error_the_web_side_writes_is_translated(locale: str) -> None:
    for message in (
        protocol.worker_lost(2),
        jobs.queue_gave_up(),
        jobs.no_spec(EXERCISE),
        jobs.grader_stopped("boom"),
    ):
        assert message.message_id in catalog(locale), (locale, message.message_id)


def test_the_local_backend_s_lost_runner_is_the_queue_s_message(
    session: Session, learner: User
) -> None:
    """reclaim_stale (the local backend) and the queue's stalled-job policy write one message."""
    submitted = service.submit(
        session, user_id=learner.id, exercise=EXERCISE, code="x", locale="pt-BR"
    )
    session.flush()
    claimed = jobs.claim(session, submitted.submission.id, "gone-host:1:abc")
    assert claimed is not None
    reclaimed = jobs.reclaim_stale(session, me="here:2:def", lease_seconds=-1, max_attempts=1)
    assert reclaimed.ended == [claimed.id]
    session.expire_all()
    stored = service.get_for_learner(session, user_id=learner.id, submission_id=claimed.id)
    assert stored.result is not None
    assert stored.result["error_id"] == protocol.worker_lost(1).message_id
    assert stored.result["error"] == str(protocol.worker_lost(1))
