"""The learner's progress on the pages, from the learning domain.

The lesson page depends on `lesson_progress`: None for a visitor, else an object with
`completed_steps` (step ids), `last_step` (a step id or None) and `quiz_answers` (question id ->
the learner's latest choice, for questions and choices the lesson still has). The page marks
completed steps, resumes at `last_step` when the URL names no step, and shows each saved answer
with its verdict.

The course page depends on `course_progress`: None for a visitor, or a mapping from lesson id to
a `LessonStanding` for every lesson that loads. The course page shows the counts and each
lesson's Start, Continue or Review link (`routes.lesson_action`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends

from app.auth.deps import OptionalLearner
from app.db import SessionDep
from app.learning import service as learning
from app.learning.standing import LessonStanding


@dataclass(frozen=True)
class PageProgress:
    """What the lesson page needs; truthy for every signed-in learner, so the page loads the
    progress recorder."""

    completed_steps: frozenset[str]
    last_step: str | None
    quiz_answers: Mapping[str, str] = field(default_factory=dict)


def lesson_progress(
    learner: OptionalLearner, session: SessionDep, lesson_id: str
) -> PageProgress | None:
    if learner is None:
        return None
    progress = learning.lesson_progress(session, learner.id, lesson_id)
    if progress is None:
        return PageProgress(frozenset(), None)
    return PageProgress(
        frozenset(progress.completed_steps),
        progress.last_step,
        learning.saved_quiz_answers(progress, lesson_id),
    )


def course_progress(
    learner: OptionalLearner, session: SessionDep
) -> Mapping[str, LessonStanding] | None:
    if learner is None:
        return None
    return learning.course_standing(session, learner.id)


ProgressDep = Annotated[PageProgress | None, Depends(lesson_progress)]
CourseProgressDep = Annotated[Mapping[str, LessonStanding] | None, Depends(course_progress)]
