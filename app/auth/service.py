"""Accounts: register, authenticate, issue and revoke per-device tokens. No FastAPI here."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.auth import repository, security
from app.auth.models import ROLES, DeviceToken, User
from app.auth.passwords import check_password
from app.errors import AppError

# Writing last_used_at on every request would turn every read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=5)
# A device unused this long is signed out: a forgotten browser or a sold phone stops working.
IDLE_LIMIT = timedelta(days=90)


@dataclass(frozen=True)
class AuthContext:
    """Who is calling, with which device token, and how it reached us."""

    user: User
    device: DeviceToken
    via: str  # "bearer" | "cookie"


def normalize_email(email: str) -> str:
    return email.strip().lower()


@dataclass(frozen=True)
class Registration:
    """The account as the client sees it; `created` is False when the address was taken (the
    answer looks the same, so that registering does not reveal who has an account)."""

    user: User
    created: bool


def register(session: Session, *, email: str, password: str, display_name: str) -> User:
    """A new account; `email_taken` when the address has one (for the pages)."""
    registration = register_quietly(
        session, email=email, password=password, display_name=display_name
    )
    if not registration.created:
        raise _email_taken()
    return registration.user


def register_quietly(
    session: Session, *, email: str, password: str, display_name: str
) -> Registration:
    """A new account, or, when the address has one already, an unsaved look-alike made with the
    same work (the password is hashed either way), so status and timing say nothing."""
    check_password(password, email=email)
    user = User(
        id=uuid.uuid4(),
        email=normalize_email(email),
        display_name=display_name.strip() or display_name,
        password_hash=security.hash_password(password),
        created_at=datetime.now(UTC),
    )
    if repository.get_user_by_email(session, user.email) is not None:
        return Registration(user, created=False)
    try:
        with session.begin_nested():  # a concurrent registration of the same email loses here
            repository.add(session, user)
    except IntegrityError:
        session.expunge(user)
        return Registration(user, created=False)
    return Registration(user, created=True)


def _email_taken() -> AppError:
    return AppError(
        "email_taken",
        409,
        "An account with this email exists already. Sign in, or register with another email.",
    )


def authenticate(session: Session, *, email: str, password: str) -> User:
    user = repository.get_user_by_email(session, normalize_email(email))
    if user is None:
        security.verify_password(security.dummy_hash(), password)
        raise _invalid_credentials()
    if not security.verify_password(user.password_hash, password):
        raise _invalid_credentials()
    if security.needs_rehash(user.password_hash):
        user.password_hash = security.hash_password(password)
    return user


def _invalid_credentials() -> AppError:
    return AppError(
        "invalid_credentials",
        401,
        "The email or password is wrong. Check both and try again.",
        headers={"WWW-Authenticate": "Bearer"},
    )


def issue_token(session: Session, user: User, *, device_name: str, kind: str) -> str:
    """A new device token for `user`; the raw token is returned once and never stored."""
    token = security.new_device_token()
    now = datetime.now(UTC)
    repository.add(
        session,
        DeviceToken(
            id=uuid.uuid4(),
            user_id=user.id,
            token_hash=security.token_digest(token),
            name=(device_name.strip() or "Unnamed device")[:120],
            kind=kind,
            created_at=now,
            last_used_at=now,
        ),
    )
    return token


def resolve_token(session: Session, token: str, *, via: str) -> AuthContext | None:
    found = repository.get_active_token(session, security.token_digest(token))
    if found is None:
        return None
    device, user = found
    now = datetime.now(UTC)
    last_used = aware_utc(device.last_used_at)
    if last_used < now - IDLE_LIMIT:
        return None  # not written here: a refused request rolls back; the list filters it too
    if last_used < now - LAST_USED_RESOLUTION:
        device.last_used_at = now
    return AuthContext(user=user, device=device, via=via)


def learner_of_token(session: Session, token_digest: str) -> uuid.UUID | None:
    """The learner a device token (given as its digest) was issued to, for per-learner limits."""
    return repository.token_owner(session, token_digest)


def device_is_active(session: Session, device_id: uuid.UUID) -> bool:
    """Whether the device is still signed in (read fresh: another request may have revoked it)."""
    return repository.is_active(session, device_id)


def revoke(device: DeviceToken) -> None:
    repository.mark_revoked(device, datetime.now(UTC))


def list_devices(session: Session, user: User) -> list[DeviceToken]:
    used_since = datetime.now(UTC) - IDLE_LIMIT
    return repository.list_active_devices(session, user.id, used_since=used_since)


def revoke_device(session: Session, user: User, device_id: uuid.UUID) -> None:
    """Sign one of the learner's devices out. Another learner's device id is simply not found."""
    device = repository.get_device_of_user(session, user.id, device_id)
    if device is None:
        raise AppError(
            "not_found", 404, "No signed-in device with this id. Reload your device list."
        )
    revoke(device)


def aware_utc(value: datetime) -> datetime:
    # SQLite hands datetimes back without a zone; everything we store is UTC.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def set_role(session: Session, *, email: str, role: str) -> User:
    """Make the account with this address a learner or an instructor (`python -m app role`).

    LookupError when no account has the address; ValueError for a role that does not exist.
    """
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    user = repository.get_user_by_email(session, normalize_email(email))
    if user is None:
        raise LookupError(f"no account has the address {email!r}")
    user.role = role
    session.flush()
    return user
