"""The hooks through which the progress domain shows a learner's progress on the pages.

The lesson page depends on `lesson_progress`, the course page on `course_progress`; by default
there is none. The learning domain replaces them in its `install(app)`:

    app.dependency_overrides[app.web.progress.lesson_progress] = my_progress_dependency

Its dependency may use `OptionalLearner`, `SessionDep` and the path parameter `lesson_id`, and
returns an object with `completed_steps` (a collection of step ids), `last_step` (a step id or
None) and `quiz_answers` (question id -> the learner's latest choice, for questions and choices
the lesson still has), or None for a visitor. The page marks completed steps, resumes at
`last_step` when the URL names no step, and shows each saved answer with its verdict.

`course_progress` may use `OptionalLearner` and `SessionDep`; it returns None for a visitor, or a
mapping from lesson id to a `LessonStandingView` for every lesson that loads. The course page
shows the counts and each lesson's Start, Continue or Review link (`routes.lesson_action`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal, Protocol

from fastapi import Depends


class LessonProgressView(Protocol):
    @property
    def completed_steps(self) -> Collection[str]: ...

    @property
    def last_step(self) -> str | None: ...

    @property
    def quiz_answers(self) -> Mapping[str, str]: ...


class LessonStandingView(Protocol):
    """Counts against the lesson's current content, and the first thing left to do."""

    @property
    def steps_done(self) -> int: ...
    @property
    def steps_total(self) -> int: ...
    @property
    def quiz_correct(self) -> int: ...
    @property
    def quiz_total(self) -> int: ...
    @property
    def exercises_passed(self) -> int: ...
    @property
    def exercises_total(self) -> int: ...
    @property
    def next_step(self) -> int | None: ...  # 1-based index of the first step not completed
    @property
    def next_question(self) -> str | None: ...
    @property
    def next_exercise(self) -> str | None: ...  # the exercise's slug
    @property
    def status(self) -> Literal["new", "in_progress", "done"]: ...


def lesson_progress() -> Any:
    """None: no progress to show (overridden by the learning domain)."""
    return None


def course_progress() -> Mapping[str, LessonStandingView] | None:
    """None: no progress to show (overridden by the learning domain)."""
    return None


ProgressDep = Annotated[Any, Depends(lesson_progress)]
CourseProgressDep = Annotated[Mapping[str, LessonStandingView] | None, Depends(course_progress)]
