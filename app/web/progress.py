"""The hook through which the progress domain shows a learner's progress on the lesson page.

The lesson page depends on `lesson_progress`; by default there is none. The learning domain
replaces it in its `install(app)`:

    app.dependency_overrides[app.web.progress.lesson_progress] = my_progress_dependency

Its dependency may use `OptionalLearner`, `SessionDep` and the path parameter `lesson_id`, and
returns an object with `completed_steps` (a collection of step ids) and `last_step` (a step id or
None), or None for a visitor. The page marks completed steps and, when the URL names no step,
resumes at `last_step`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Protocol

from fastapi import Depends


class LessonProgressView(Protocol):
    @property
    def completed_steps(self) -> Collection[str]: ...

    @property
    def last_step(self) -> str | None: ...


def lesson_progress() -> Any:
    """None: no progress to show (overridden by the learning domain)."""
    return None


ProgressDep = Annotated[Any, Depends(lesson_progress)]
