"""Request and response models of the accounts API."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

def _as_utc(value: datetime) -> datetime:
    # SQLite hands datetimes back without a zone; everything stored is UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


UtcDateTime = Annotated[datetime, AfterValidator(_as_utc)]

EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"


class UserCreate(BaseModel):
    email: str = Field(max_length=320, pattern=EMAIL_PATTERN, examples=["ada@example.org"])
    password: str = Field(min_length=10, max_length=256, examples=["correct horse battery"])
    display_name: str = Field(min_length=1, max_length=80, examples=["Ada"])

    @field_validator("display_name")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("display_name must contain more than spaces")
        return value


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
