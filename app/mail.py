"""Sending one mail through the configured SMTP server (RDV_SMTP_*). No FastAPI here.

Requests never call this: they queue their mail in the outbox table (app/outmail/queue.py) and
the sender (app/outmail/sender.py) delivers it, with retries, off the request threads.
"""

from __future__ import annotations

import logging
import smtplib
from email.message import EmailMessage

from app.config import Settings

log = logging.getLogger(__name__)

# A relay may take its time to greet or to answer: this is off the request threads, bounded
# by the sender's few threads, and a mail that times out is tried again later.
SMTP_TIMEOUT_S = 60


class MailFailed(Exception):
    """The relay could not take the mail now (tried again later)."""


def deliver(settings: Settings, *, to: str, subject: str, body: str) -> None:
    """Hand one plain-text message to the relay; MailFailed if it could not be."""
    assert settings.smtp_host, "no SMTP server configured"
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
        raise MailFailed(f"{type(exc).__name__}: {exc}") from exc
