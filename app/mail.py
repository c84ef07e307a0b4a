"""Sending mail through the configured SMTP server (RDV_SMTP_*), from a background queue. No
FastAPI here.

A request never waits on the mail relay: `outbox().put(...)` queues the mail and returns at once
(app/auth/mails.py calls it after the answer); one sender thread delivers the queue in order,
trying each mail `ATTEMPTS` times with a growing pause between, and logs a mail it gave up on.
The queue is bounded (a mail beyond `QUEUE_SIZE` is dropped, logged) and lives in the process:
`close_outbox()` (the app's shutdown) delivers what is queued for a few seconds, then stops.
"""

from __future__ import annotations

import logging
import queue
import smtplib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage

from app.config import Settings

log = logging.getLogger(__name__)

ATTEMPTS = 3
RETRY_PAUSE_S = 2.0  # then 4 s: a relay that is down for a moment loses nothing
QUEUE_SIZE = 1000
SMTP_TIMEOUT_S = 10


@dataclass(frozen=True)
class Mail:
    settings: Settings
    to: str
    subject: str
    body: str


def send_mail(settings: Settings, *, to: str, subject: str, body: str) -> bool:
    """Send one plain-text message now; False (logged, never raised) when it could not be sent."""
    if not settings.smtp_host:
        log.warning("no SMTP server configured (RDV_SMTP_HOST): a mail was not sent")
        return False
    message = EmailMessage()
    message["From"] = settings.mail_from
    message["To"] = to
    message["Subject"] = subject
    message.set_content(body)
    try:
        with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=SMTP_TIMEOUT_S) as smtp:
            if settings.smtp_starttls:
                smtp.starttls()
            if settings.smtp_user and settings.smtp_password:
                smtp.login(settings.smtp_user, settings.smtp_password)
            smtp.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        log.error("sending mail through %s failed: %s", settings.smtp_host, exc)
        return False
    return True


def _send(mail: Mail) -> bool:
    """Whether the mail is handled: sent, or there is nowhere to send it (no retry helps)."""
    sent = send_mail(mail.settings, to=mail.to, subject=mail.subject, body=mail.body)
    return sent or not mail.settings.smtp_host


class Outbox:
    """A bounded queue of mails and the one thread that sends them, with retries."""

    def __init__(
        self,
        send: Callable[[Mail], bool] | None = None,
        *,
        attempts: int = ATTEMPTS,
        pause_s: float = RETRY_PAUSE_S,
        size: int = QUEUE_SIZE,
    ) -> None:
        self._send = send or _send
        self.attempts = attempts
        self.pause_s = pause_s
        self._queue: queue.Queue[Mail | None] = queue.Queue(size)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, settings: Settings, *, to: str, subject: str, body: str) -> bool:
        """Queue a mail; False (logged) when the queue is full."""
        self._start()
        try:
            self._queue.put_nowait(Mail(settings, to, subject, body))
        except queue.Full:
            log.error("the mail queue is full (%d): a mail was dropped", self._queue.maxsize)
            return False
        return True

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether every queued mail was handled (sent or given up) within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout_s)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mail", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while (mail := self._queue.get()) is not None:
            try:
                self._deliver(mail)
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _deliver(self, mail: Mail) -> None:
        for attempt in range(1, self.attempts + 1):
            try:
                if self._send(mail):
                    return
            except Exception:
                log.exception("sending a mail raised")
            if attempt < self.attempts:
                time.sleep(self.pause_s * 2 ** (attempt - 1))
        log.error("a mail was given up after %d attempts", self.attempts)


_outbox = Outbox()


def outbox() -> Outbox:
    return _outbox


def close_outbox() -> None:
    _outbox.close()
