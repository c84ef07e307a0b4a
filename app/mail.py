"""Sending mail through the configured SMTP server (RDV_SMTP_*). No FastAPI here."""

from __future__ import annotations

import logging
import smtplib
from email.message import EmailMessage

from app.config import Settings

log = logging.getLogger(__name__)


def send_mail(settings: Settings, *, to: str, subject: str, body: str) -> bool:
    """Send one plain-text message; False (logged, never raised) when it could not be sent."""
    if not settings.smtp_host:
        log.warning("no SMTP server configured (RDV_SMTP_HOST): a mail was not sent")
        return False
    message = EmailMessage()
    message["From"] = settings.mail_from
    message["To"] = to
    message["Subject"] = subject
    message.set_content(body)
    try:
        with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=10) as smtp:
            if settings.smtp_starttls:
                smtp.starttls()
            if settings.smtp_user and settings.smtp_password:
                smtp.login(settings.smtp_user, settings.smtp_password)
            smtp.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        log.error("sending mail through %s failed: %s", settings.smtp_host, exc)
        return False
    return True
