"""Mail leaves from the outbox table, not from the request: queued in the request's transaction,
retried with backoff when the relay fails, never lost when the sender stops, never more than a
few to one mailbox (both databases)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope
from aiosmtpd.smtp import Session as SMTPSession
from fastapi.testclient import TestClient
from sqlalchemy import delete, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.auth.ratelimit import AuthRateLimits
from app.config import Settings
from app.mail import MailFailed
from app.outmail import queue, sender
from app.outmail.models import OutgoingMail
from tests.auth.conftest import Inbox
from tests.auth.factories import PASSWORD

SETTINGS = Settings(smtp_host="127.0.0.1", smtp_port=25)


def _flaky(failures: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The relay refuses `failures` times, then takes every mail (its recipients, in order)."""
    delivered: list[str] = []
    tries = iter(range(failures + 100))

    def deliver(settings: Settings, *, to: str, subject: str, body: str) -> None:
        if next(tries) < failures:
            raise MailFailed("421 try later")
        delivered.append(to)

    monkeypatch.setattr(sender, "deliver", deliver)
    monkeypatch.setattr(queue, "FIRST_PAUSE_S", 0.0)  # due again at once: drain retries
    return delivered


@contextmanager
def _sessions_of(session: Session) -> Iterator[Session]:
    yield session


def _only_this_tests_mails(session: Session) -> None:
    """Mails other tests committed (through a served app, whose sender does not run in tests)
    are not this test's to drain; the deletion is rolled back with the test's transaction."""
    session.execute(delete(OutgoingMail))


def test_a_mail_the_relay_refused_is_sent_again(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    _only_this_tests_mails(session)
    delivered = _flaky(2, monkeypatch)
    queue.enqueue(session, to="ada@example.org", subject="Hi", body="text")
    assert sender.drain(lambda: _sessions_of(session), SETTINGS) == 1
    assert delivered == ["ada@example.org"]  # once, on the third try
    assert queue.waiting(session) == 0


def test_a_refused_mail_waits_longer_each_time() -> None:
    pauses = [queue.backoff(n).total_seconds() for n in (1, 2, 3, 20)]
    assert pauses == [2.0, 4.0, 8.0, queue.MAX_PAUSE_S]


def test_a_mail_is_given_up_after_its_attempts_logged_and_the_next_one_still_leaves(
    session: Session, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    delivered: list[str] = []

    def deliver(settings: Settings, *, to: str, subject: str, body: str) -> None:
        if to.startswith("lost"):
            raise MailFailed("550 no such mailbox")
        delivered.append(to)

    _only_this_tests_mails(session)
    monkeypatch.setattr(sender, "deliver", deliver)
    monkeypatch.setattr(queue, "FIRST_PAUSE_S", 0.0)
    monkeypatch.setattr(queue, "MAX_ATTEMPTS", 3)
    queue.enqueue(session, to="lost@example.org", subject="Hi", body="text")
    queue.enqueue(session, to="next@example.org", subject="Hi", body="text")
    sender.drain(lambda: _sessions_of(session), SETTINGS, limit=1)
    assert delivered == ["next@example.org"]
    assert "given up after 3 attempts (last error: 550 no such mailbox)" in caplog.text
    assert queue.waiting(session) == 0


def test_a_mail_queued_by_a_request_that_failed_is_never_sent(
    committing_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queued in the request's own transaction: rolled back with it."""
    delivered = _flaky(0, monkeypatch)
    marker = f"{uuid.uuid4().hex}@example.org"
    with Session(committing_engine) as session:
        queue.enqueue(session, to=marker, subject="Hi", body="text")
        session.flush()
        session.rollback()
    with Session(committing_engine) as session:
        assert marker not in session.scalars(select(OutgoingMail.to_address)).all()
    assert marker not in delivered


class _SlowRelay:
    """A real SMTP server on loopback that takes `delay_s` to accept each mail."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.received: list[str] = []
        relay = self

        class Handler:
            async def handle_DATA(
                self, server: SMTP, session: SMTPSession, envelope: Envelope
            ) -> str:
                await asyncio.sleep(relay.delay_s)
                relay.received.extend(envelope.rcpt_tos)
                return "250 Message accepted for delivery"

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()


def test_mails_queued_when_the_sender_stops_are_all_sent_after_a_restart(
    committing_engine: Engine,
) -> None:
    """Eleven mails, a relay that takes a second each: the sender is stopped after the first
    few; a new sender (the restarted process) sends every one of the rest, none twice lost."""
    from sqlalchemy.orm import sessionmaker

    maker = sessionmaker(bind=committing_engine, expire_on_commit=False)

    @contextmanager
    def sessions() -> Iterator[Session]:
        with maker() as session, session.begin():
            yield session

    marker = uuid.uuid4().hex
    recipients = [f"{n}-{marker}@example.org" for n in range(11)]
    with sessions() as session:
        for to in recipients:
            queue.enqueue(session, to=to, subject="Welcome", body="text")
    slow = _SlowRelay(1.0)
    try:
        settings = Settings(smtp_host="127.0.0.1", smtp_port=slow.port)
        first = sender.Sender(sessions, settings, concurrency=2, poll_s=0.2).start()
        time.sleep(1.5)
        first.stop(timeout_s=3)
    finally:
        slow.stop()
    fast = _SlowRelay(0.0)
    try:
        settings = Settings(smtp_host="127.0.0.1", smtp_port=fast.port)
        second = sender.Sender(sessions, settings, concurrency=4, poll_s=0.2).start()
        deadline = time.monotonic() + 60
        while set(recipients) - set(slow.received) - set(fast.received):
            assert time.monotonic() < deadline, "mails were lost"
            time.sleep(0.1)
        second.stop()
    finally:
        fast.stop()
    # Other tests' committed mails may be sent too: count this test's own, each exactly once.
    ours = [to for to in [*slow.received, *fast.received] if marker in to]
    assert sorted(ours) == sorted(recipients)
    with sessions() as session:
        session.execute(delete(OutgoingMail).where(OutgoingMail.to_address.in_(recipients)))


def test_a_commit_that_queued_a_mail_wakes_the_sender(session: Session) -> None:
    waker = threading.Event()
    queue.subscribe(waker)
    try:
        queue.enqueue(session, to="ada@example.org", subject="Hi", body="text")
        assert not waker.is_set()  # not before the commit: the mail may still be rolled back
        session.commit()
        assert waker.is_set()
    finally:
        queue.unsubscribe(waker)


def test_someone_registering_again_and_again_mails_the_owner_twice_an_hour(
    client: TestClient, inbox: Inbox
) -> None:
    payload = {"email": "victim@example.org", "password": PASSWORD, "display_name": "V"}
    answers = [client.post("/api/v1/auth/register", json=payload) for _ in range(20)]
    assert {answer.status_code for answer in answers} <= {201, 429}
    # Only the victim's mails: other tests' committed mails may leave through the same inbox.
    to_victim = [m for m in inbox.messages if "victim@example.org" in str(m["To"])]
    assert [str(mail["Subject"]) for mail in to_victim] == [
        "Welcome to Rendezvous",
        "Someone tried to register with your address",
        "Someone tried to register with your address",
    ]


def test_every_mail_to_one_address_is_limited_whatever_its_kind() -> None:
    limits = AuthRateLimits()
    allowed = [limits.check_mail(" Many@Example.org ") for _ in range(12)]
    assert allowed == [True] * 10 + [False] * 2  # padding and capitals are the same mailbox
    assert limits.check_mail("other@example.org")
