"""Request and response models of the learning API: quiz answers and progress sync."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from app.auth.schemas import UtcDateTime
from app.text import NulFreeStr

CLIENT_ID_PATTERN = r"^[A-Za-z0-9._:-]+$"
MAX_EVENTS_PER_BATCH = 500

ClientEventId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=CLIENT_ID_PATTERN,
        description="The client's own id for this event (e.g. a UUID); unique per learner. "
        "Sending the same id again changes nothing, so retries are always safe.",
    ),
]
ContentId = Annotated[NulFreeStr, Field(min_length=1, max_length=100)]


class _EventBase(BaseModel):
    id: ClientEventId
    lesson_id: ContentId
    at: datetime = Field(
        description="When it happened on the device (ISO 8601; without a zone it is read as "
        "UTC). Times more than 5 minutes in the future are stored as the time received."
    )


class StepEvent(_EventBase):
    """`step_seen`, `step_completed`, or `position` (the learner is now at this step)."""

    type: Literal["step_seen", "step_completed", "position"]
    step_id: ContentId


class QuizAnsweredEvent(_EventBase):
    """An answer to one quiz question; the server decides whether it is correct."""

    type: Literal["quiz_answered"]
    question_id: ContentId
    choice: Annotated[NulFreeStr, Field(min_length=1, max_length=16)]


class QuizCompletedEvent(_EventBase):
    """A finished pass through the lesson's quiz; the best score is kept."""

    type: Literal["quiz_completed"]
    score: Annotated[int, Field(ge=0, le=1000)]
    max_score: Annotated[int, Field(ge=1, le=1000)]


ProgressEventIn = Annotated[
    StepEvent | QuizAnsweredEvent | QuizCompletedEvent, Field(discriminator="type")
]


class ProgressEventsIn(BaseModel):
    events: list[ProgressEventIn] = Field(max_length=MAX_EVENTS_PER_BATCH)
    since: int | None = Field(
        None,
        ge=0,
        description="The cursor from your last sync: the answer then holds only lessons changed "
        "since. Omit it to get every lesson's merged state.",
    )

    @field_validator("since", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: object) -> object:
        """A JSON integer (281 or 281.0), never `false` read as cursor 0."""
        if isinstance(value, bool):
            raise ValueError("since must be an integer cursor, not true or false")
        return value


class QuizAnswerPublic(BaseModel):
    choice: str
    correct: bool
    answered_at: UtcDateTime


class QuizProgress(BaseModel):
    answers: dict[str, QuizAnswerPublic] = Field(
        description="The latest answer to each question, by question id."
    )
    correct_questions: list[str] = Field(description="Questions ever answered correctly.")
    best_score: int | None
    max_score: int | None


class ExerciseProgress(BaseModel):
    attempts: int
    passed: bool
    best_status: Literal["pass", "fail", "error"]
    best_passed_checks: int
    total_checks: int
    last_status: Literal["pass", "fail", "error"]
    last_attempt_at: UtcDateTime


class LessonProgressPublic(BaseModel):
    completed_steps: list[str]
    seen_steps: list[str]
    last_step: str | None = Field(description="Where to resume: the latest `position` event.")
    last_position_at: UtcDateTime | None
    quiz: QuizProgress
    exercises: dict[str, ExerciseProgress] = Field(description="By full exercise id.")
    version: int = Field(description="The cursor value at which this lesson last changed.")
    updated_at: UtcDateTime


class RejectedEvent(BaseModel):
    id: str
    code: Literal[
        "unknown_lesson",
        "unknown_step",
        "unknown_question",
        "unknown_choice",
        "invalid_time",
        "invalid_score",
    ]
    message: str


class ProgressState(BaseModel):
    lessons: dict[str, LessonProgressPublic] = Field(
        description="Merged state by lesson id: every lesson, or only those changed since the "
        "cursor you sent."
    )
    cursor: int = Field(
        description="Send it back as `since` next time. Opaque: only compare for equality."
    )
    rejected: list[RejectedEvent] = Field(
        default_factory=list,
        description="Events not stored: they name content that does not exist, carry a time "
        "before the year 2000 (`invalid_time`) or a score above its maximum (`invalid_score`). "
        "Do not retry them.",
    )


class QuizAnswerIn(BaseModel):
    choice: Annotated[NulFreeStr, Field(min_length=1, max_length=16, examples=["b"])]


class QuizVerdictPublic(BaseModel):
    correct: bool
    explanation: str = Field(description="The explanation as Markdown.")
    explanation_html: str = Field(description="The explanation rendered as HTML.")
    recorded: bool = Field(description="True when saved to the signed-in learner's progress.")
