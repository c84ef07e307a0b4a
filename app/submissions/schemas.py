"""Request and response bodies of the submissions API. (contract: the mobile app uses them)"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.text import NulFreeStr, StorableStr
from grader.contract import Result

SubmissionStatus = Literal["queued", "running", "done", "error"]
# "<lesson id>/<exercise id>", e.g. ddp-fundamentals/train (contract).
EXERCISE_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,98}/[a-z0-9][a-z0-9-]{0,98}$"


class SubmissionCreate(BaseModel):
    exercise: str = Field(pattern=EXERCISE_ID_PATTERN, examples=["ddp-fundamentals/train"])
    # At most 64 KiB of UTF-8; larger programs get 413 `code_too_large` with a clear message.
    code: StorableStr = Field(
        pattern=r"^[^\x00]*[^\x00\s][^\x00]*$", examples=["import torch.distributed as dist\n..."]
    )


class SubmissionAccepted(BaseModel):
    """202: the submission is stored and queued; follow `events_url` or poll `url`."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    exercise: str
    status: SubmissionStatus
    queue_position: int | None = Field(
        None, description="1 when it is next to start; null once it runs."
    )
    url: str
    events_url: str


class SubmissionPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    exercise: str
    status: SubmissionStatus
    result: Result | None = Field(
        None, description="The grader's Result once `status` is done or error."
    )
    attempts: int = Field(0, description="Runs started; more than one after a grader restart.")
    queue_position: int | None = None
    created_at: datetime
    finished_at: datetime | None = None


class SubmissionSummary(BaseModel):
    """One line of the learner's history (no code, no output)."""

    id: uuid.UUID
    exercise: str
    status: SubmissionStatus
    outcome: Literal["pass", "fail", "error"] | None = None
    summary: str | None = None
    created_at: datetime


class SubmissionList(BaseModel):
    submissions: list[SubmissionSummary]
    next_cursor: str | None = Field(
        None,
        description="Send it back as `cursor` for the next (older) page; null on the last page.",
        examples=["MjAyNi0xMi0wMVQxMDowMDowMCswMDowMHwxMjM"],
    )


class DraftUpdate(BaseModel):
    code: NulFreeStr
    base_updated_at: datetime | None = Field(
        None,
        description="The `updated_at` of the server's draft this code was edited from. When the "
        "server's draft has changed since (another device saved), the answer is 409 "
        "`draft_conflict` and nothing is saved: let the learner choose, then send again with "
        "the new `updated_at`. Omit it to save unconditionally.",
    )


class DraftPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    exercise: str
    code: str
    updated_at: datetime
