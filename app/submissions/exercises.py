"""Where the submissions domain learns an exercise's grading spec: the content service."""

from __future__ import annotations

from collections.abc import Callable

from grader.contract import ExerciseSpec

# Given an exercise id, its ExerciseSpec, or None when there is no such exercise.
SpecLookup = Callable[[str], ExerciseSpec | None]


def spec_from_content(exercise_id: str) -> ExerciseSpec | None:
    from app.content import service as content

    try:
        return content.get_exercise(exercise_id).spec
    except content.ContentNotFound:
        return None
