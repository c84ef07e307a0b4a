"""Mail leaves from the outbox, not from the request: retried when the relay fails, never more
than a few to one mailbox (both databases for the limits, through the API)."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from app.auth.ratelimit import AuthRateLimits
from app.config import Settings
from app.mail import Mail, Outbox
from tests.auth.conftest import Inbox
from tests.auth.factories import PASSWORD


def _flaky(failures: int) -> tuple[list[Mail], object]:
    """A sender that fails `failures` times, then delivers (into the list it returns)."""
    delivered: list[Mail] = []
    tries = iter(range(failures + 100))

    def send(mail: Mail) -> bool:
        if next(tries) < failures:
            return False
        delivered.append(mail)
        return True

    return delivered, send


def test_a_mail_the_relay_refused_is_sent_again() -> None:
    delivered, send = _flaky(2)
    outbox = Outbox(send, attempts=3, pause_s=0.01)  # type: ignore[arg-type]
    outbox.put(Settings(), to="ada@example.org", subject="Hi", body="text")
    assert outbox.wait_idle(10)
    outbox.close()
    assert [mail.to for mail in delivered] == ["ada@example.org"]  # once, on the third try


def test_a_mail_is_given_up_after_its_attempts_and_the_next_one_still_leaves() -> None:
    delivered, send = _flaky(3)
    outbox = Outbox(send, attempts=3, pause_s=0.01)  # type: ignore[arg-type]
    outbox.put(Settings(), to="lost@example.org", subject="Hi", body="text")
    outbox.put(Settings(), to="next@example.org", subject="Hi", body="text")
    assert outbox.wait_idle(10)
    outbox.close()
    assert [mail.to for mail in delivered] == ["next@example.org"]


def test_putting_a_mail_never_waits_for_the_relay() -> None:
    release = threading.Event()
    outbox = Outbox(lambda mail: release.wait(10))
    for number in range(5):  # the sender is stuck on the first: the others queue
        assert outbox.put(Settings(), to=f"{number}@example.org", subject="s", body="b")
    assert not outbox.wait_idle(0.1)
    release.set()
    assert outbox.wait_idle(10)
    outbox.close()


def test_someone_registering_again_and_again_mails_the_owner_twice_an_hour(
    client: TestClient, inbox: Inbox
) -> None:
    payload = {"email": "victim@example.org", "password": PASSWORD, "display_name": "V"}
    answers = [client.post("/api/v1/auth/register", json=payload) for _ in range(20)]
    assert {answer.status_code for answer in answers} <= {201, 429}
    assert [str(mail["Subject"]) for mail in inbox.messages] == [
        "Welcome to Rendezvous",
        "Someone tried to register with your address",
        "Someone tried to register with your address",
    ]


def test_every_mail_to_one_address_is_limited_whatever_its_kind() -> None:
    limits = AuthRateLimits()
    allowed = [limits.check_mail(" Many@Example.org ") for _ in range(12)]
    assert allowed == [True] * 10 + [False] * 2  # padding and capitals are the same mailbox
    assert limits.check_mail("other@example.org")
