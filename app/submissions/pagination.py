"""Opaque cursors for submission history: the last row's (created_at, id), base64url-encoded.

A cursor keeps its place when newer submissions arrive (unlike an offset)."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import UTC, datetime

from app.errors import N_, AppError

CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"


class InvalidCursor(AppError):
    code = "invalid_request"
    status_code = 422
    message = N_("This cursor is not one we gave out. Start again from the first page.")


def encode(created_at: datetime, submission_id: uuid.UUID) -> str:
    aware = created_at if created_at.tzinfo else created_at.replace(tzinfo=UTC)
    raw = f"{aware.astimezone(UTC).isoformat()}|{submission_id.hex}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        when, _, ident = raw.partition("|")
        moment = datetime.fromisoformat(when)
        aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        # In UTC, as the database compares it: a crafted offset at the calendar's very ends
        # (9999-12-31T23:59:59-14:00) does not exist there (it was a 500).
        return aware.astimezone(UTC), uuid.UUID(hex=ident)
    except (binascii.Error, UnicodeDecodeError, ValueError, OverflowError) as exc:
        raise InvalidCursor() from exc
