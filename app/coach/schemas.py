"""Request and response bodies of the coach API. (contract: the mobile app uses them)"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.content.schemas import SLUG_PATTERN
from app.submissions.schemas import EXERCISE_ID_PATTERN

MAX_QUESTION_CHARS = 2000
CHECK_ID_PATTERN = r"^[a-z0-9_]+(\.[a-z0-9_]+)+$"
Provider = Literal["builtin", "llm"]
# What the result page's buttons ask: the server acts on it and never re-reads the button's text.
AskIntent = Literal["why_failed", "hint", "still_stuck"]


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
                    "check_id": "sampler.set_epoch",
                }
            ]
        },
    )

    question: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        pattern=r"\S",
        description="What the learner typed. May be left out when `intent` is given (a button).",
    )
    lesson_id: str = Field(pattern=SLUG_PATTERN, max_length=64, examples=["ddp-fundamentals"])
    step_id: str | None = Field(None, pattern=SLUG_PATTERN, max_length=64, examples=["set-epoch"])
    exercise: str | None = Field(
        None, pattern=EXERCISE_ID_PATTERN, examples=["ddp-fundamentals/train"]
    )
    submission_id: uuid.UUID | None = Field(
        None, description="One of your own submissions: the coach explains its failed checks."
    )
    check_id: str | None = Field(
        None,
        pattern=CHECK_ID_PATTERN,
        max_length=64,
        description="The failed check of `submission_id` the question is about (the page's "
        '"Why did this fail?" button); kept for the instructors\' view. Needs `submission_id`.',
        examples=["sampler.set_epoch"],
    )
    intent: AskIntent | None = Field(
        None,
        description="What a button of the result page asks about `check_id`: `why_failed` (why "
        "did this check fail), `hint` (a hint on it) or `still_stuck` (asked before, still "
        "stuck: the next level). Given, the question's text is not classified. Needs "
        "`submission_id`.",
        examples=["why_failed"],
    )

    @model_validator(mode="after")
    def _check_needs_a_submission(self) -> CoachQuestion:
        if self.check_id is not None and self.submission_id is None:
            raise ValueError("check_id names a check of a submission: send submission_id too")
        if self.intent is not None and self.submission_id is None:
            raise ValueError("intent asks about a submission: send submission_id too")
        if self.question is None and self.intent is None:
            raise ValueError("send the question, or the intent of the button that asks")
        return self


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


# ---- the instructors' view: where learners struggle ------------------------------------------
class StrugglePlace(BaseModel):
    """Questions asked at one place of the course: a lesson step, an exercise, or the lesson."""

    lesson_id: str
    lesson_title: str
    step_id: str | None
    step_title: str | None
    exercise: str | None
    exercise_title: str | None
    questions: int
    learners: int = Field(description="How many different learners asked there")
    last_asked_at: datetime


class StruggleCheck(BaseModel):
    """A check learners failed and asked the coach about."""

    exercise: str
    check_id: str
    title: str = Field(description="The check's title in the request's language")
    questions: int = Field(
        description="Questions about a submission that failed this check, each question counted "
        'once: under the check its "Why did this fail?" named, else under the submission\'s first '
        "failed check"
    )
    why_questions: int = Field(
        description='Questions asked with the page\'s "Why did this fail?" button on this check'
    )
    learners: int


class StruggleQuestion(BaseModel):
    """One recent question; the learner is a pseudonym, stable across the view, not the name."""

    learner: str = Field(examples=["Learner 3fa2c1"])
    lesson_id: str
    step_id: str | None
    exercise: str | None
    check_id: str | None = Field(description='The check its "Why did this fail?" button named')
    check_title: str | None = Field(description="That check's title in the request's language")
    failed_checks: list[str] = Field(description="The checks the asked-about submission failed")
    question: str
    locale: str
    provider: Provider
    asked_at: datetime


class StruggleReport(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "since": "2026-11-01T00:00:00Z",
                    "lesson_id": None,
                    "questions": 42,
                    "learners": 17,
                    "places": [
                        {
                            "lesson_id": "ddp-fundamentals",
                            "lesson_title": "DDP fundamentals",
                            "step_id": None,
                            "step_title": None,
                            "exercise": "ddp-fundamentals/train",
                            "exercise_title": "Train with DDP",
                            "questions": 12,
                            "learners": 7,
                            "last_asked_at": "2026-11-30T18:02:11Z",
                        }
                    ],
                    "checks": [
                        {
                            "exercise": "ddp-fundamentals/train",
                            "check_id": "sampler.set_epoch",
                            "title": "Each epoch reshuffles the data",
                            "questions": 9,
                            "why_questions": 6,
                            "learners": 5,
                        }
                    ],
                    "recent": [
                        {
                            "learner": "Learner 3fa2c1",
                            "lesson_id": "ddp-fundamentals",
                            "step_id": None,
                            "exercise": "ddp-fundamentals/train",
                            "check_id": "sampler.set_epoch",
                            "check_title": "Each epoch reshuffles the data",
                            "failed_checks": ["sampler.set_epoch"],
                            "question": "Why did this fail: Each epoch reshuffles the data?",
                            "locale": "en",
                            "provider": "builtin",
                            "asked_at": "2026-11-30T18:02:11Z",
                        }
                    ],
                }
            ]
        }
    )

    since: datetime
    lesson_id: str | None
    questions: int
    learners: int
    places: list[StrugglePlace] = Field(description="Most questions first")
    checks: list[StruggleCheck] = Field(description="Most questions first")
    recent: list[StruggleQuestion] = Field(description="Newest first")
