"""Queries for users and device tokens."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.auth.models import DeviceToken, PasswordReset, User


def get_user_by_email(session: Session, email: str) -> User | None:
    return session.scalar(select(User).where(User.email == email))


def get_user(session: Session, user_id: uuid.UUID) -> User | None:
    return session.get(User, user_id)


def get_active_token(session: Session, token_hash: str) -> tuple[DeviceToken, User] | None:
    row = session.execute(
        select(DeviceToken, User)
        .join(User, User.id == DeviceToken.user_id)
        .where(DeviceToken.token_hash == token_hash, DeviceToken.revoked_at.is_(None))
    ).first()
    return (row[0], row[1]) if row else None


def token_owner(session: Session, token_hash: str) -> uuid.UUID | None:
    """Whose token this is (revoked or not: a token never changes owner)."""
    return session.scalar(select(DeviceToken.user_id).where(DeviceToken.token_hash == token_hash))


def list_active_devices(
    session: Session, user_id: uuid.UUID, *, used_since: datetime
) -> list[DeviceToken]:
    return list(
        session.scalars(
            select(DeviceToken)
            .where(
                DeviceToken.user_id == user_id,
                DeviceToken.revoked_at.is_(None),
                DeviceToken.last_used_at >= used_since,
            )
            .order_by(DeviceToken.last_used_at.desc(), DeviceToken.id)
        )
    )


def get_device_of_user(
    session: Session, user_id: uuid.UUID, device_id: uuid.UUID
) -> DeviceToken | None:
    return session.scalar(
        select(DeviceToken).where(
            DeviceToken.id == device_id,
            DeviceToken.user_id == user_id,
            DeviceToken.revoked_at.is_(None),
        )
    )


def is_active(session: Session, device_id: uuid.UUID) -> bool:
    found = session.scalar(
        select(DeviceToken.id).where(DeviceToken.id == device_id, DeviceToken.revoked_at.is_(None))
    )
    return found is not None


def add(session: Session, row: User | DeviceToken | PasswordReset) -> None:
    session.add(row)
    session.flush()


def mark_revoked(device: DeviceToken, when: datetime) -> None:
    device.revoked_at = when


def delete_user(session: Session, user: User) -> None:
    """The user row; every per-learner table goes with it (ON DELETE CASCADE)."""
    session.execute(delete(User).where(User.id == user.id))
    session.expunge(user)


def revoke_devices(
    session: Session, user_id: uuid.UUID, *, when: datetime, keep: DeviceToken | None = None
) -> None:
    """Sign out every active device of the user but `keep`."""
    others = update(DeviceToken).where(
        DeviceToken.user_id == user_id, DeviceToken.revoked_at.is_(None)
    )
    if keep is not None:
        others = others.where(DeviceToken.id != keep.id)
    session.execute(others.values(revoked_at=when))
    session.flush()


def unused_reset(session: Session, token_hash: str) -> PasswordReset | None:
    return session.scalar(
        select(PasswordReset).where(
            PasswordReset.token_hash == token_hash, PasswordReset.used_at.is_(None)
        )
    )


def use_up_resets(session: Session, user_id: uuid.UUID, *, when: datetime) -> None:
    """Every reset link of the user not used yet stops working."""
    session.execute(
        update(PasswordReset)
        .where(PasswordReset.user_id == user_id, PasswordReset.used_at.is_(None))
        .values(used_at=when)
    )
