"""Request and response models of the accounts API."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.text import NulFreeStr, StorableStr


def _as_utc(value: datetime) -> datetime:
    # SQLite hands datetimes back without a zone; everything stored is UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


UtcDateTime = Annotated[datetime, AfterValidator(_as_utc)]

# A shape check only (no spaces or control characters, one @, a dot in the domain); written
# without \s, whose meaning differs between Python, Rust and JavaScript regular expressions, so
# the OpenAPI document accepts exactly what the server does.
_EMAIL_CHAR = r"[^@\x00-\x20\x7f-\x9f]"
EMAIL_PATTERN = rf"^{_EMAIL_CHAR}+@{_EMAIL_CHAR}+\.{_EMAIL_CHAR}+$"


VISIBLE_WITHOUT_NUL = r"^[^\x00]*[^\x00-\x20\x7f-\x9f][^\x00]*$"


class UserCreate(BaseModel):
    email: StorableStr = Field(max_length=320, pattern=EMAIL_PATTERN, examples=["ada@example.org"])
    password: NulFreeStr = Field(min_length=10, max_length=256, examples=["correct horse battery"])
    # At least one visible character and no NUL (one pattern, in Python and in OpenAPI).
    display_name: StorableStr = Field(
        min_length=1, max_length=80, pattern=VISIBLE_WITHOUT_NUL, examples=["Ada"]
    )


class UserPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    email: str
    display_name: str
    created_at: UtcDateTime


class TokenPublic(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"


class DevicePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    kind: Literal["browser", "api"]
    created_at: UtcDateTime
    last_used_at: UtcDateTime
    current: bool = Field(False, description="True for the device making this request.")


NewPassword = Annotated[
    NulFreeStr,
    Field(
        min_length=10,
        max_length=256,
        description="At least 10 characters; the commonest passwords and simple repeats are "
        "refused (422 `weak_password`).",
        examples=["violet kettle sunrise"],
    ),
]


class PasswordChange(BaseModel):
    current_password: NulFreeStr = Field(max_length=256, examples=["correct horse battery"])
    new_password: NewPassword


class AccountDeletion(BaseModel):
    password: NulFreeStr = Field(
        max_length=256, description="The account's password, to confirm.", examples=["..."]
    )


class PasswordResetRequest(BaseModel):
    email: StorableStr = Field(max_length=320, pattern=EMAIL_PATTERN, examples=["ada@example.org"])


class PasswordResetConfirm(BaseModel):
    token: NulFreeStr = Field(
        min_length=1, max_length=200, description="The token from the reset email."
    )
    new_password: NewPassword
