"""The auth tests' fixtures: a real SMTP server on loopback that the app mails through."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from email import message_from_bytes
from email.message import Message

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope
from aiosmtpd.smtp import Session as SMTPSession
from fastapi import FastAPI

from app.config import Settings
from app.outmail.sender import drain


class Inbox:
    """What the SMTP server received; `messages` once the app's outbox has been delivered (the
    tests' apps start no sender: `drain` sends what the requests queued, in the test's session)."""

    def __init__(self, app: FastAPI | None = None) -> None:
        self.app = app
        self.received: list[Message] = []

    @property
    def messages(self) -> list[Message]:
        if self.app is not None:
            drain(self.app.state.unit_of_work, self.app.state.settings)
        return self.received


class _Receiver:
    """The SMTP server's handler (apart from Inbox: aiosmtpd reads every attribute of it)."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def handle_DATA(self, server: SMTP, session: SMTPSession, envelope: Envelope) -> str:
        self.inbox.received.append(message_from_bytes(envelope.content or b""))
        return "250 Message accepted for delivery"


@pytest.fixture
def inbox(app: FastAPI) -> Iterator[Inbox]:
    """A real SMTP server on loopback; the app's settings point at it."""
    handler = Inbox(app)
    with socket.socket() as probe:  # a free port (aiosmtpd checks readiness by connecting)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(_Receiver(handler), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        app.state.settings = Settings(
            smtp_host="127.0.0.1", smtp_port=port, base_url="http://rdv.example"
        )
        yield handler
    finally:
        controller.stop()


def mail_text(mail: Message) -> str:
    payload = mail.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode()
