"""What the analytics report carries (GET /api/v1/instructor/analytics).

A count is a number of distinct learners unless its name says submissions. A count of at least
one learner but fewer than the cohort threshold (`min_cohort`, RDV_ANALYTICS_MIN_COHORT) is
`null`: the page and the CSV show it as "<5". Rows with `locale: null` count every learner;
with `by_locale`, rows follow for each learner locale ('' when unknown).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Count = int | None


class SequenceItem(BaseModel):
    kind: Literal["step", "question", "exercise"]
    id: str = Field(description="Step id, question id, or full exercise id")
    title: str


class StepFigures(BaseModel):
    step_id: str
    title: str
    locale: str | None
    reached: Count = Field(description="Learners who opened the step")
    completed: Count = Field(description="Learners who moved on from it")


class ChoiceFigures(BaseModel):
    choice_id: str
    text: str
    correct: bool
    learners: Count = Field(description="Learners who chose it at least once")


class QuestionFigures(BaseModel):
    question_id: str
    text: str
    locale: str | None
    answered: Count
    first_try_right: Count = Field(description="Learners whose first answer was right")
    choices: list[ChoiceFigures]


class CheckFigures(BaseModel):
    check_id: str = Field(description="'' for a failed run without a failed check")
    title: str
    first_failing: Count = Field(description="Failed submissions whose first failed check it was")
    share: float | None = Field(description="first_failing / failed_submissions")


class ExerciseFigures(BaseModel):
    exercise: str
    title: str
    locale: str | None
    opened: Count = Field(description="Learners with a draft or a submission")
    submitted: Count
    passed: Count
    passed_first: Count = Field(description="Learners whose first judged submission passed")
    median_submissions: float | None = Field(
        description="Judged submissions up to the first pass, median over learners who passed"
    )
    median_minutes_to_pass: float | None = Field(
        description="Whole minutes from the first submission to the first pass, median over "
        "learners who passed"
    )
    failed_submissions: Count
    checks: list[CheckFigures]


class AnalyticsReport(BaseModel):
    lesson_id: str
    lesson_title: str
    since: datetime | None
    until: datetime | None
    by_locale: bool
    min_cohort: int
    sequence: list[SequenceItem] = Field(description="The lesson's items in the lesson's order")
    steps: list[StepFigures]
    questions: list[QuestionFigures]
    exercises: list[ExerciseFigures]
    lag_seconds: float = Field(
        0.0,
        description="How old the figures are: the age of the oldest activity not yet counted "
        "(the analytics consumer applies the learners' activity shortly after it happens); "
        "0: every activity is counted",
    )
