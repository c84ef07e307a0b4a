"""An account's life after sign-up: change the password, reset a forgotten one by email, delete
the account with everything personal. No FastAPI here; never commits.

Deleting the user row deletes the rest: every per-learner table references `users.id` with
ON DELETE CASCADE (SQLite enforces it too, see app/db.py), so a table added later goes as well.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.auth import repository, security
from app.auth.models import DeviceToken, PasswordReset, User
from app.auth.passwords import check_password
from app.auth.service import aware_utc, normalize_email
from app.domain_events import Event, Kind, record
from app.errors import N_, AppError

RESET_VALID_FOR = timedelta(hours=1)


class WrongPassword(AppError):
    code = "invalid_credentials"
    status_code = 401
    message = N_("Your current password is wrong. Check it and try again.")


class ResetLinkInvalid(AppError):
    code = "reset_token_invalid"
    status_code = 400
    message = N_(
        "This reset link has expired or was already used. Ask for a new one from the sign-in page."
    )


@dataclass(frozen=True)
class ResetRequest:
    """A reset to mail: the raw token goes only into the message."""

    user: User
    token: str


def change_password(
    session: Session, user: User, *, current: str, new: str, keep_device: DeviceToken
) -> None:
    """A new password; every other device is signed out (the one making the change stays)."""
    if not security.verify_password(user.password_hash, current):
        raise WrongPassword()
    _set_password(session, user, new, keep_device=keep_device)


def delete_account(session: Session, user: User, *, password: str) -> None:
    """The account and all its personal data, confirmed with the password."""
    if not security.verify_password(user.password_hash, password):
        raise WrongPassword()
    record(session, [Event(Kind.ACCOUNT_DELETED, user.id)])
    repository.delete_user(session, user)


def sign_out_everywhere(session: Session, user: User) -> None:
    """Every device of the learner signed out, the one asking included."""
    repository.revoke_devices(session, user.id, when=datetime.now(UTC))


def request_reset(session: Session, email: str) -> ResetRequest | None:
    """A reset token for the account with this address; None when there is none (the caller
    answers the same either way)."""
    user = repository.get_user_by_email(session, normalize_email(email))
    if user is None:
        return None
    token = secrets.token_urlsafe(32)
    now = datetime.now(UTC)
    repository.add(
        session,
        PasswordReset(
            user_id=user.id,
            token_hash=security.token_digest(token),
            created_at=now,
            expires_at=now + RESET_VALID_FOR,
        ),
    )
    return ResetRequest(user, token)


def reset_password(session: Session, *, token: str, new: str) -> User:
    """Use a reset token once: the new password, every device signed out."""
    check_password(new)
    now = datetime.now(UTC)
    reset = repository.unused_reset(session, security.token_digest(token))
    if reset is None or aware_utc(reset.expires_at) < now:
        raise ResetLinkInvalid()
    user = repository.get_user(session, reset.user_id)
    if user is None:
        raise ResetLinkInvalid()
    _set_password(session, user, new, keep_device=None)
    return user


def _set_password(
    session: Session, user: User, new: str, *, keep_device: DeviceToken | None
) -> None:
    """The new password; every reset link issued before it stops working, and the devices
    other than `keep_device` are signed out."""
    check_password(new, email=user.email)
    user.password_hash = security.hash_password(new)
    now = datetime.now(UTC)
    repository.use_up_resets(session, user.id, when=now)
    repository.revoke_devices(session, user.id, when=now, keep=keep_device)
