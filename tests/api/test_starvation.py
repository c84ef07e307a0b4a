"""The attacks that starved the admission limit, against a real uvicorn server on 127.0.0.1
(SQLite and PostgreSQL): while each runs, another learner's requests and `/healthz` answer 200.

The server has 3 admission slots (a pool of 2 + 1), so a handful of attackers would hold them
all if anything slow still held a slot: half-sent bodies, questions waiting on a slow model,
registrations waiting on a slow mail relay. Bounds on time are generous (a shared, noisy box):
the assertion is that the others are answered at all, where they used to get 503.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.api.served import SilentRelay, served
from tests.coach.fake_llm import FakeModel

SLOTS = 3
HOURLY = 5  # the coach's hourly limit per learner (the attacks below ask at most 4 each)
PASSWORD = "violet kettle marmalade"
LESSON = "ddp-fundamentals"
ANSWERED_WITHIN_S = 5.0  # generous: a starved request waited 2 s, then got 503


@dataclass
class Served:
    url: str
    database_url: str
    model: FakeModel


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    model = FakeModel(mode="slow", delay_s=3.0).start()
    relay = SilentRelay()
    env = {
        "RDV_DB_POOL_SIZE": str(SLOTS - 1),
        "RDV_DB_POOL_OVERFLOW": "1",
        "RDV_BODY_GRACE_S": "60",  # the half-sent bodies stay open for the whole test
        "RDV_COACH_URL": model.url,
        "RDV_COACH_TIMEOUT_SECONDS": "30",
        "RDV_COACH_QUESTIONS_PER_HOUR": str(HOURLY),
        "RDV_SMTP_HOST": "127.0.0.1",
        "RDV_SMTP_PORT": str(relay.port),
    }
    try:
        with served(request.param, tmp_path_factory.mktemp("served"), env) as running:
            yield Served(running.url, running.database_url, model)
    finally:
        model.stop()
        relay.close()


def sign_up(url: str) -> dict[str, str]:
    """A new learner's bearer token."""
    email = f"learner-{uuid.uuid4().hex[:8]}@example.org"
    api = httpx.Client(base_url=f"{url}/api/v1", timeout=30)
    created = api.post(
        "/auth/register", json={"email": email, "password": PASSWORD, "display_name": "L"}
    )
    assert created.status_code == 201, created.text
    issued = api.post(
        "/auth/token", data={"username": email, "password": PASSWORD, "device_name": "laptop"}
    )
    assert issued.status_code == 200, issued.text
    return {"Authorization": f"Bearer {issued.json()['access_token']}"}


def others_are_answered(url: str, auth: dict[str, str]) -> list[float]:
    """Another learner's requests and the load balancer's probe: each 200, soon. Their times."""
    times = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for path, headers in (
            ("/api/v1/me", auth),
            ("/api/v1/courses", auth),
            (f"/api/v1/lessons/{LESSON}", auth),
            ("/healthz", {}),
        ):
            started = time.monotonic()
            response = http.get(path, headers=headers)
            took = time.monotonic() - started
            assert response.status_code == 200, (path, response.status_code, response.text)
            assert took < ANSWERED_WITHIN_S, (path, took)
            times.append(took)
    return times


def half_sent_post(url: str, token: str) -> socket.socket:
    """A POST that announces 1000 bytes of body and sends 9: a slow client, holding on."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        b"POST /api/v1/auth/token HTTP/1.1\r\n"
        + f"Host: {host}\r\nAuthorization: Bearer {token}\r\n".encode()
        + b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"
        + b"username="
    )
    return sock


def test_half_sent_bodies_hold_no_slot(server: Served) -> None:
    ada = sign_up(server.url)
    attackers = [half_sent_post(server.url, f"made-up-{i}") for i in range(2 * SLOTS)]
    try:
        time.sleep(0.5)  # the server has every one of them in hand
        others_are_answered(server.url, ada)
    finally:
        for sock in attackers:
            sock.close()


def test_registrations_waiting_on_a_slow_mail_relay_hold_no_slot(server: Served) -> None:
    """Every registration sends a mail; the relay never answers. The registrations are answered
    (the mail leaves from the outbox) and so is everyone else."""
    ada = sign_up(server.url)
    with ThreadPoolExecutor(2 * SLOTS) as pool:
        signed_up = list(pool.map(lambda _: sign_up(server.url), range(2 * SLOTS)))
        others_are_answered(server.url, ada)
    assert len(signed_up) == 2 * SLOTS


def _questions(
    url: str, learners: list[dict[str, str]], each: int, stream: bool
) -> tuple[ThreadPoolExecutor, list[Future[httpx.Response]]]:
    pool = ThreadPoolExecutor(len(learners) * each)

    def ask(auth: dict[str, str]) -> httpx.Response:
        headers = {**auth, "Accept": "text/event-stream"} if stream else auth
        return httpx.post(
            f"{url}/api/v1/coach",
            json={"question": "Why does every rank see the same samples?", "lesson_id": LESSON},
            headers=headers,
            timeout=60,
        )

    return pool, [pool.submit(ask, auth) for auth in learners for _ in range(each)]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "event-stream"])
def test_questions_waiting_on_a_slow_model_hold_no_slot(server: Served, stream: bool) -> None:
    ada, asking = sign_up(server.url), [sign_up(server.url), sign_up(server.url)]
    asked_before = len(server.model.requests)
    pool, questions = _questions(server.url, asking, SLOTS + 1, stream)
    try:
        # As many questions waiting on the model as there are slots: before, they held them all.
        _until(lambda: len(server.model.requests) - asked_before >= SLOTS)
        others_are_answered(server.url, ada)
        answers = [question.result() for question in questions]
    finally:
        pool.shutdown()
    assert [answer.status_code for answer in answers] == [200] * len(questions)
    done = [a.json() if not stream else a.text.rsplit("event: done", 1)[1] for a in answers]
    assert all("llm" in str(answer) for answer in done)  # the model's answers, recorded


def test_the_coach_s_hourly_limit_holds_for_questions_asked_at_once(server: Served) -> None:
    """Eight questions at once, all waiting on the model together: exactly the limit's worth
    are answered, the rest refused with 429 (all eight used to be answered)."""
    pool, questions = _questions(server.url, [sign_up(server.url)], 8, stream=False)
    try:
        answers = [question.result() for question in questions]
    finally:
        pool.shutdown()
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [200] * HOURLY + [429] * (8 - HOURLY)
    refused = [a.json()["code"] for a in answers if a.status_code == 429]
    assert set(refused) == {"rate_limited"}


def test_a_device_s_questions_after_a_pause_do_not_wait_for_each_other(server: Served) -> None:
    """A device's first request after 5 minutes writes its "last used" time; that row used to
    stay locked for the whole question (the model call included), so four questions from one
    device were answered one after another. Now the model gets all four while none has been
    answered."""
    device = sign_up(server.url)
    engine = create_engine(server.database_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE device_tokens SET last_used_at = :then"), {"then": _ago(600)})
    engine.dispose()
    asked_before = len(server.model.requests)
    pool, questions = _questions(server.url, [device], 4, stream=False)
    try:
        _until(lambda: len(server.model.requests) - asked_before >= 4, timeout_s=60)
        answered_by_then = sum(question.done() for question in questions)
        answers = [question.result() for question in questions]
    finally:
        pool.shutdown()
    assert answered_by_then == 0
    assert [answer.status_code for answer in answers] == [200] * 4


def _ago(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


def _until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the attack never got going"
        time.sleep(0.05)
