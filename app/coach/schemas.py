"""Request and response bodies of the coach API. (contract: the mobile app uses them)"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.content.schemas import SLUG_PATTERN
from app.submissions.schemas import EXERCISE_ID_PATTERN

MAX_QUESTION_CHARS = 2000
Provider = Literal["builtin", "llm"]


class CoachQuestion(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "question": "Why does every epoch see the same samples?",
                    "lesson_id": "ddp-fundamentals",
                    "step_id": None,
                    "exercise": "ddp-fundamentals/train",
                    "submission_id": "0b9e8f2c-4a51-4d3e-9c1f-2f6a1d0c7e55",
                }
            ]
        },
    )

    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=r"\S")
    lesson_id: str = Field(pattern=SLUG_PATTERN, max_length=64, examples=["ddp-fundamentals"])
    step_id: str | None = Field(None, pattern=SLUG_PATTERN, max_length=64, examples=["set-epoch"])
    exercise: str | None = Field(
        None, pattern=EXERCISE_ID_PATTERN, examples=["ddp-fundamentals/train"]
    )
    submission_id: uuid.UUID | None = Field(
        None, description="One of your own submissions: the coach explains its failed checks."
    )


class Source(BaseModel):
    """A lesson step the answer draws on."""

    lesson_id: str
    step_id: str
    title: str
    url: str = Field(examples=["/lessons/ddp-fundamentals?step=11#step-set-epoch"])


class CoachAnswer(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "answer": "**1. The sampler reshuffles every epoch** ...",
                    "answer_html": "<p><strong>1. The sampler reshuffles every epoch</strong>",
                    "sources": [
                        {
                            "lesson_id": "ddp-fundamentals",
                            "step_id": "set-epoch",
                            "title": "Reshuffle every epoch",
                            "url": "/lessons/ddp-fundamentals?step=11#step-set-epoch",
                        }
                    ],
                    "provider": "builtin",
                }
            ]
        }
    )

    answer: str = Field(description="Markdown")
    answer_html: str = Field(description="The answer as HTML; any HTML in the Markdown is escaped")
    sources: list[Source]
    provider: Provider


class CoachExchangePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    lesson_id: str
    step_id: str | None
    exercise: str | None
    submission_id: uuid.UUID | None
    question: str
    answer: str
    sources: list[Source]
    provider: Provider
    created_at: datetime


class CoachHistory(BaseModel):
    exchanges: list[CoachExchangePublic]
