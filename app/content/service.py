"""The content service: the course catalog, lessons in a locale, exercises and quiz answers.

The catalog is loaded once and reloaded when a file under the lessons directory changes (an
instructor's edit shows on the next page view). A broken lesson is logged with its file and line
and left out; the rest of the course still serves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from markupsafe import Markup

from app.config import get_settings
from app.content.loader import Catalog, load_catalog
from app.content.localized import (
    LocalizedCourse,
    LocalizedLesson,
    localize_course,
    localize_lesson,
)
from app.content.markdown import render_markdown
from app.content.schemas import Text
from grader.contract import ExerciseSpec

T = TypeVar("T")

log = logging.getLogger(__name__)

DEFAULT_LOCALE = "en"


class ContentNotFound(LookupError):
    """No such lesson, exercise or question in the loaded course."""


class LessonUnavailable(ContentNotFound):
    """The course lists the lesson but its file has problems (they are logged)."""


@dataclass(frozen=True)
class ExerciseInfo:
    id: str  # full id, "<lesson id>/<exercise id>"
    lesson_id: str
    slug: str
    title: Text
    prompt: Text
    starter_code: str
    starter_path: Path
    solution_path: Path
    spec: ExerciseSpec


@dataclass(frozen=True)
class QuizVerdict:
    correct: bool
    answer: str
    explanation: str

    @property
    def explanation_html(self) -> Markup:
        """The explanation's Markdown as HTML, as step bodies are shown."""
        return render_markdown(self.explanation)


@dataclass
class _Loaded:
    lessons_dir: Path
    fingerprint: tuple[tuple[str, int, int], ...]
    catalog: Catalog
    localized_lessons: dict[tuple[str, str], LocalizedLesson] = field(default_factory=dict)
    localized_courses: dict[str, LocalizedCourse] = field(default_factory=dict)


_lock = threading.Lock()
_current: _Loaded | None = None
_checked_at = 0.0
# How often to look for edited lesson files (a stat of every file): at most once a second.
RELOAD_CHECK_SECONDS = 1.0


def _fingerprint(lessons_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """Every file's path, mtime and size: any edit changes it."""
    entries = []
    for path in sorted(lessons_dir.rglob("*")):
        try:
            stat = path.stat()
        except OSError:
            continue
        if path.is_file():
            entries.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(entries)


def _loaded() -> _Loaded:
    global _current, _checked_at
    lessons_dir = Path(get_settings().lessons_dir).resolve()
    current = _current
    now = time.monotonic()
    if (
        current is not None
        and current.lessons_dir == lessons_dir
        and now - _checked_at < RELOAD_CHECK_SECONDS
    ):
        return current
    fingerprint = _fingerprint(lessons_dir)
    _checked_at = now
    with _lock:
        current = _current
        if (
            current is not None
            and current.lessons_dir == lessons_dir
            and current.fingerprint == fingerprint
        ):
            return current
        catalog = load_catalog(lessons_dir)
        for problem in catalog.problems:
            log.error("lesson content problem: %s", problem)
        log.info(
            "loaded %d lessons from %s (%d problems)",
            len(catalog.lessons),
            lessons_dir,
            len(catalog.problems),
        )
        _current = _Loaded(lessons_dir, fingerprint, catalog)
        return _current


def reset() -> None:
    """Forget the loaded catalog (tests that point the settings at other lessons)."""
    global _current, _checked_at
    with _lock:
        _current = None
        _checked_at = 0.0


def get_catalog() -> Catalog:
    return _loaded().catalog


class PerCatalog(Generic[T]):
    """A value built from the catalog this service holds now, built again after a reload (the
    coach's step index and its concepts)."""

    def __init__(self, build: Callable[[Catalog], T]) -> None:
        self._build = build
        self._built: tuple[Catalog, T] | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        catalog = get_catalog()
        built = self._built
        if built is not None and built[0] is catalog:
            return built[1]
        with self._lock:
            if self._built is None or self._built[0] is not catalog:
                self._built = (catalog, self._build(catalog))
            return self._built[1]


def localized_course(locale: str = DEFAULT_LOCALE) -> LocalizedCourse:
    loaded = _loaded()
    course = loaded.localized_courses.get(locale)
    if course is None:
        course = localize_course(loaded.catalog, locale)
        loaded.localized_courses[locale] = course
    return course


def localized_lesson(lesson_id: str, locale: str = DEFAULT_LOCALE) -> LocalizedLesson:
    """The lesson in `locale`; raises ContentNotFound (or LessonUnavailable if it is broken)."""
    loaded = _loaded()
    key = (lesson_id, locale)
    lesson = loaded.localized_lessons.get(key)
    if lesson is not None:
        return lesson
    source = loaded.catalog.lessons.get(lesson_id)
    if source is None:
        if lesson_id in loaded.catalog.unavailable:
            raise LessonUnavailable(lesson_id)
        raise ContentNotFound(lesson_id)
    lesson = localize_lesson(source, locale)
    loaded.localized_lessons[key] = lesson
    return lesson


def get_exercise(exercise_id: str) -> ExerciseInfo:
    """An exercise by its full id (`ddp-fundamentals/train`); raises ContentNotFound."""
    lesson_id, _, slug = exercise_id.partition("/")
    source = get_catalog().lessons.get(lesson_id)
    exercise = None
    if source is not None:
        exercise = next((item for item in source.lesson.exercises if item.id == slug), None)
    if source is None or exercise is None:
        raise ContentNotFound(exercise_id)
    folder = source.exercise_dir(slug)
    return ExerciseInfo(
        id=exercise_id,
        lesson_id=lesson_id,
        slug=slug,
        title=exercise.title,
        prompt=exercise.prompt,
        starter_code=source.starter_code[slug],
        starter_path=folder / "starter.py",
        solution_path=folder / "solution.py",
        spec=exercise.grading,
    )


def check_answer(
    lesson_id: str, question_id: str, choice: str, locale: str = DEFAULT_LOCALE
) -> QuizVerdict:
    """Whether `choice` answers the quiz question, with the explanation in `locale`."""
    source = get_catalog().lessons.get(lesson_id)
    question = None
    if source is not None:
        question = next((q for q in source.lesson.quiz if q.id == question_id), None)
    if question is None:
        raise ContentNotFound(f"{lesson_id}/{question_id}")
    explanation = question.explanation.get(locale) or question.explanation.en
    if f"quiz.{question_id}.explanation" in source.stale.get(locale, ()):  # type: ignore[union-attr]
        explanation = question.explanation.en  # translated from an older English
    return QuizVerdict(choice == question.answer, question.answer, explanation)
