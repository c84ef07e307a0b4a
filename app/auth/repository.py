"""Queries for users and device tokens."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import DeviceToken, User


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


def add(session: Session, row: User | DeviceToken) -> None:
    session.add(row)
    session.flush()


def mark_revoked(device: DeviceToken, when: datetime) -> None:
    device.revoked_at = when
