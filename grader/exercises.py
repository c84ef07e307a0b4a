"""Exercise specs from the lesson files: the `grading` block of each exercise is an ExerciseSpec.

The grader reads lessons/*/lesson.yaml itself (it never imports the app).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from grader.contract import ExerciseSpec

LESSONS_DIR = Path(__file__).resolve().parent.parent / "lessons"


class UnknownExercise(LookupError):
    """No lesson file defines this exercise."""


def _lessons(lessons_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    yaml = YAML(typ="safe")
    out = []
    for path in sorted(lessons_dir.glob("*/lesson.yaml")):
        try:
            data = yaml.load(path.read_text(encoding="utf-8"))
        except Exception:
            continue  # a broken lesson file is reported by `python -m app.content validate`
        if isinstance(data, dict):
            out.append((path, data))
    return out


def load_spec(exercise_id: str, lessons_dir: Path | None = None) -> ExerciseSpec:
    """The ExerciseSpec of `<lesson id>/<exercise id>`, e.g. "ddp-fundamentals/train"."""
    lesson_id, _, ex_id = exercise_id.partition("/")
    for path, data in _lessons(lessons_dir or LESSONS_DIR):
        if data.get("id") != lesson_id:
            continue
        for ex in data.get("exercises") or []:
            if isinstance(ex, dict) and ex.get("id") == ex_id and "grading" in ex:
                return ExerciseSpec.model_validate(ex["grading"])
        raise UnknownExercise(f"{path} has no exercise {ex_id!r} with a grading block")
    raise UnknownExercise(f"no lesson file defines the exercise {exercise_id!r}")


def graded_exercises(lessons_dir: Path | None = None) -> list[str]:
    """Every `<lesson id>/<exercise id>` that has a grading block, in lesson file order."""
    return [
        f"{data.get('id')}/{ex.get('id')}"
        for _, data in _lessons(lessons_dir or LESSONS_DIR)
        for ex in data.get("exercises") or []
        if isinstance(ex, dict) and "grading" in ex
    ]


def exercise_dir(exercise_id: str, lessons_dir: Path | None = None) -> Path | None:
    """lessons/NN-<lesson>/exercises/<exercise> (holding starter.py and solution.py), if present."""
    lesson_id, _, ex_id = exercise_id.partition("/")
    for path, data in _lessons(lessons_dir or LESSONS_DIR):
        if data.get("id") == lesson_id:
            d = path.parent / "exercises" / ex_id
            return d if d.is_dir() else None
    return None


def graded_specs(lessons_dir: Path | None = None) -> dict[str, tuple[ExerciseSpec, Path | None]]:
    """Every graded exercise's spec and folder, the lesson files read once (in lesson order)."""
    out: dict[str, tuple[ExerciseSpec, Path | None]] = {}
    for path, data in _lessons(lessons_dir or LESSONS_DIR):
        for ex in data.get("exercises") or []:
            if isinstance(ex, dict) and "grading" in ex:
                folder = path.parent / "exercises" / str(ex.get("id"))
                out[f"{data.get('id')}/{ex.get('id')}"] = (
                    ExerciseSpec.model_validate(ex["grading"]),
                    folder if folder.is_dir() else None,
                )
    return out
