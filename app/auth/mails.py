"""The account mails, in the language of the request, queued in the outbox table in the request's
own transaction (app/outmail: sent by a sender of its own, with retries and backoff, never lost
on a restart; the request holds nothing while the relay is slow). No FastAPI routes here.

Every mail is limited per recipient, and the mail that anyone can set off, "someone tried to
register with your address", more tightly (`AuthRateLimits.check_mail`): a mailbox is never
flooded. A mail over a limit is dropped, logged."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from app.auth import lifecycle
from app.auth.ratelimit import AuthRateLimits
from app.auth.service import Registration
from app.config import Settings
from app.errors import N_
from app.i18n import translate
from app.outmail import queue

log = logging.getLogger(__name__)


def _queue(
    session: Session,
    settings: Settings,
    locale: str,
    *,
    to: str,
    subject: str,
    paragraphs: list[str],
    limits: AuthRateLimits,
    tried_to_register: bool = False,
    **params: str,
) -> None:
    if not limits.check_mail(to, tried_to_register=tried_to_register):
        log.warning("a mail over its per-recipient limit was not sent")
        return
    body = "\n\n".join(translate(locale, text).format(**params) for text in paragraphs)
    queue.enqueue(session, to=to, subject=translate(locale, subject), body=body + "\n")


def send_reset_mail(
    session: Session,
    settings: Settings,
    reset: lifecycle.ResetRequest,
    locale: str,
    limits: AuthRateLimits,
) -> None:
    """The link (and the code, for the app) that sets a new password."""
    link = f"{settings.base_url.rstrip('/')}/reset-password?token={reset.token}"
    paragraphs = [
        N_("Someone asked to reset the password of your Rendezvous account."),
        N_("To choose a new password, open this link within an hour:\n{link}"),
        N_("In the app, enter this code instead: {token}"),
        N_("If it was not you, ignore this mail: your password stays as it is."),
    ]
    _queue(
        session,
        settings,
        locale,
        to=reset.user.email,
        subject=N_("Reset your Rendezvous password"),
        paragraphs=paragraphs,
        limits=limits,
        link=link,
        token=reset.token,
    )


def send_registration_mail(
    session: Session,
    settings: Settings,
    registration: Registration,
    locale: str,
    limits: AuthRateLimits,
) -> None:
    """After a registration, which answers the same whether or not the address had an account:
    a welcome to a new account, or, to the owner of an existing one, word that someone tried."""
    base = settings.base_url.rstrip("/")
    if registration.created:
        subject = N_("Welcome to Rendezvous")
        paragraphs = [
            N_("Your Rendezvous account is ready."),
            N_("Sign in with this address and the password you chose:\n{login}"),
            N_("If you did not create this account, ignore this mail."),
        ]
    else:
        subject = N_("Someone tried to register with your address")
        paragraphs = [
            N_(
                "Someone tried to create a Rendezvous account with this address, which has "
                "one already. No second account was made and your password stays as it is."
            ),
            N_("If it was you, sign in instead:\n{login}"),
            N_("Forgot your password? Choose a new one here:\n{forgot}"),
        ]
    _queue(
        session,
        settings,
        locale,
        to=registration.user.email,
        subject=subject,
        paragraphs=paragraphs,
        limits=limits,
        tried_to_register=not registration.created,
        login=f"{base}/login",
        forgot=f"{base}/forgot-password",
    )
