"""The account mails, in the language of the request, queued to leave after the answer (so
that sending takes no time the client could measure). No FastAPI routes here."""

from __future__ import annotations

from fastapi import BackgroundTasks

from app.auth import lifecycle
from app.auth.service import Registration
from app.config import Settings
from app.errors import N_
from app.i18n import translate
from app.mail import send_mail


def _queue(
    tasks: BackgroundTasks,
    settings: Settings,
    locale: str,
    *,
    to: str,
    subject: str,
    paragraphs: list[str],
    **params: str,
) -> None:
    body = "\n\n".join(translate(locale, text).format(**params) for text in paragraphs)
    tasks.add_task(send_mail, settings, to=to, subject=translate(locale, subject), body=body + "\n")


def send_reset_mail(
    tasks: BackgroundTasks, settings: Settings, reset: lifecycle.ResetRequest, locale: str
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
        tasks,
        settings,
        locale,
        to=reset.user.email,
        subject=N_("Reset your Rendezvous password"),
        paragraphs=paragraphs,
        link=link,
        token=reset.token,
    )


def send_registration_mail(
    tasks: BackgroundTasks, settings: Settings, registration: Registration, locale: str
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
        tasks,
        settings,
        locale,
        to=registration.user.email,
        subject=subject,
        paragraphs=paragraphs,
        login=f"{base}/login",
        forgot=f"{base}/forgot-password",
    )
