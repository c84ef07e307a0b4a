"""Read the lesson files (YAML 1.2 via ruamel.yaml), validate them, and say where each problem is.

`load_catalog(lessons_dir)` never raises for a content problem: a broken lesson is left out of
the catalog and described by a `Problem` (file, line, field path, what is wrong).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from app.content import staleness, starters
from app.content.ablations import ablation_issues
from app.content.conceptcheck import concept_issues
from app.content.hintcheck import hint_level_issues
from app.content.schemas import Course, Lesson, Text
from app.content.yamlio import YamlProblem, format_loc, line_of, read_yaml, to_plain
from grader.contract import MAX_CODE_BYTES

LESSON_DIR_PATTERN = re.compile(r"^(?P<number>\d{2})-(?P<slug>[a-z0-9]+(?:-[a-z0-9]+)*)$")
COURSE_FILE = "course.yaml"
M = TypeVar("M", bound=BaseModel)
LESSON_FILE = "lesson.yaml"


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a lesson file, with where it is."""

    file: Path
    line: int | None
    field: str
    message: str
    # A warning leaves the lesson online (an untranslated text shows in English meanwhile);
    # `python -m app.content validate --strict` fails on warnings too (CI, shipped locales).
    warning: bool = False

    def __str__(self) -> str:
        where = self.field or "(file)"
        kind = "warning: " if self.warning else ""
        return f"{display_path(self.file)}:{self.line or 1}: {where}: {kind}{self.message}"


@dataclass(frozen=True)
class LoadedLesson:
    lesson: Lesson
    number: int
    directory: Path
    file: Path
    # exercise id -> starter code (solution files are only checked to exist: never sent out)
    starter_code: dict[str, str] = field(default_factory=dict)
    # locale -> field paths whose translation is stale (app/content/staleness.py)
    stale: dict[str, frozenset[str]] = field(default_factory=dict)
    # exercise id -> locale -> the starter with its comments translated, where one is current
    # (app/content/starters.py); any other locale gets the English starter
    starter_translations: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.lesson.id

    def exercise_dir(self, exercise_id: str) -> Path:
        return self.directory / "exercises" / exercise_id


@dataclass(frozen=True)
class Catalog:
    """Everything that loaded: the course, its lessons in order, and what did not load."""

    lessons_dir: Path
    course: Course
    lessons: dict[str, LoadedLesson]
    # Lessons the course lists that could not be loaded (their problems are in `problems`).
    unavailable: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    # What loaded but is incomplete: texts missing in a locale (shown in English meanwhile).
    warnings: tuple[Problem, ...] = ()

    @property
    def ordered(self) -> list[LoadedLesson]:
        return list(self.lessons.values())


def display_path(path: Path) -> str:
    """A path relative to the working directory when it is under it (as editors expect)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# --- validation -------------------------------------------------------------------------------


def _describe(error: ErrorDetails) -> str:
    kind = error["type"]
    loc = error["loc"]
    if kind == "missing":
        if loc and loc[-1] == "en":
            return "the English text is missing: add `en: ...` (English is required)"
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field: check its spelling and indentation"
    if kind == "string_pattern_mismatch":
        return "must be an id of lowercase letters, digits and single hyphens, e.g. `meet-ddp`"
    message = str(error["msg"])
    message = message.removeprefix("Value error, ")
    return message[:1].lower() + message[1:]


def validation_problems(file: Path, tree: Any, exc: ValidationError) -> list[Problem]:
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        problems.append(Problem(file, line_of(tree, loc), format_loc(loc), _describe(error)))
    return sorted(problems, key=lambda problem: problem.line or 0)


def _duplicates(
    file: Path, tree: Any, items: list[Any], where: tuple[str | int, ...]
) -> list[Problem]:
    seen: dict[str, int] = {}
    problems = []
    for index, item in enumerate(items):
        if item.id in seen:
            loc = (*where, index, "id")
            problems.append(
                Problem(
                    file,
                    line_of(tree, loc),
                    format_loc(loc),
                    f"the id {item.id!r} is used twice (first at "
                    f"{format_loc((*where, seen[item.id]))}); ids must be unique",
                )
            )
        else:
            seen[item.id] = index
    return problems


def parse_model(model: type[M], file: Path) -> tuple[M | None, Any, list[Problem]]:
    """Read and validate one file: (model or None, round-trip tree, problems)."""
    try:
        tree = read_yaml(file)
    except YamlProblem as exc:
        return None, None, [Problem(file, exc.line, exc.field, exc.message)]
    if tree is None:
        return None, None, [Problem(file, 1, "", "is empty")]
    if not isinstance(tree, dict):
        return None, tree, [Problem(file, 1, "", "must be a mapping of fields (key: value)")]
    try:
        return model.model_validate(to_plain(tree)), tree, []
    except ValidationError as exc:
        return None, tree, validation_problems(file, tree, exc)


def check_lesson(lesson: Lesson, tree: Any, file: Path, slug: str) -> list[Problem]:
    """What the schema alone cannot say: unique ids, the directory name, the exercise files."""
    problems: list[Problem] = []
    if lesson.id != slug:
        problems.append(
            Problem(
                file,
                line_of(tree, ("id",)),
                "id",
                f"is {lesson.id!r} but the directory says {slug!r}: rename one so they match",
            )
        )
    problems += _duplicates(file, tree, lesson.steps, ("steps",))
    problems += _duplicates(file, tree, lesson.quiz, ("quiz",))
    for index, question in enumerate(lesson.quiz):
        problems += _duplicates(file, tree, question.choices, ("quiz", index, "choices"))
    problems += _duplicates(file, tree, lesson.exercises, ("exercises",))
    problems += _sequence_problems(file, tree, lesson)
    step_ids = {step.id for step in lesson.steps}
    problems += _duplicates(file, tree, lesson.concepts, ("concepts",))
    for index, concept in enumerate(lesson.concepts):
        for issue in concept_issues(index, concept, step_ids):
            line = line_of(tree, issue.loc)
            problems.append(Problem(file, line, format_loc(issue.loc), issue.text, issue.warning))
    for index, exercise in enumerate(lesson.exercises):
        folder = file.parent / "exercises" / exercise.id
        issues = hint_level_issues(index, exercise, step_ids, folder, _read_starter(folder))
        for issue in issues + ablation_issues(index, exercise, folder):
            line = line_of(tree, issue.loc)
            problems.append(Problem(file, line, format_loc(issue.loc), issue.text, issue.warning))
        for name, role in (("starter.py", "starter"), ("solution.py", "solution")):
            if not (folder / name).is_file():
                loc = ("exercises", index)
                problems.append(
                    Problem(
                        file,
                        line_of(tree, loc),
                        format_loc(loc),
                        f"exercise {exercise.id!r} has no {role}: "
                        f"add {display_path(folder / name)}",
                    )
                )
    return problems


def _sequence_problems(file: Path, tree: Any, lesson: Lesson) -> list[Problem]:
    """A `sequence` names every step, question and exercise of the lesson exactly once."""
    if lesson.sequence is None:
        return []
    known = {
        "step": [step.id for step in lesson.steps],
        "question": [question.id for question in lesson.quiz],
        "exercise": [exercise.id for exercise in lesson.exercises],
    }
    section = {"step": "steps", "question": "quiz", "exercise": "exercises"}
    problems: list[Problem] = []
    seen: dict[tuple[str, str], int] = {}
    for index, item in enumerate(lesson.sequence):
        kind, item_id = item.card
        loc: tuple[str | int, ...] = ("sequence", index, kind)
        if item_id not in known[kind]:
            message = (
                f"{item_id!r} is not in `{section[kind]}`: use the id of one of the lesson's "
                f"{section[kind]} ({', '.join(known[kind]) or 'there are none'})"
            )
        elif (kind, item_id) in seen:
            first = format_loc(("sequence", seen[kind, item_id]))
            message = f"{item_id!r} is listed twice (first at {first}); list each card once"
        else:
            seen[kind, item_id] = index
            continue
        problems.append(Problem(file, line_of(tree, loc), format_loc(loc), message))
    for kind_name, ids in known.items():
        left_out = [item_id for item_id in ids if (kind_name, item_id) not in seen]
        if left_out:
            problems.append(
                Problem(
                    file,
                    line_of(tree, ("sequence",)),
                    "sequence",
                    f"leaves out the {section[kind_name]} {', '.join(left_out)}: add "
                    f"`- {kind_name}: <id>` where the learner should meet each",
                )
            )
    return problems


def _read_starter(folder: Path) -> str | None:
    path = folder / "starter.py"
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) > MAX_CODE_BYTES:
        return None
    return data.decode("utf-8", errors="replace")


def load_lesson(directory: Path) -> tuple[LoadedLesson | None, list[Problem]]:
    match = LESSON_DIR_PATTERN.match(directory.name)
    file = directory / LESSON_FILE
    if match is None:
        return None, [Problem(file, None, "", "the directory must be named NN-<lesson id>")]
    if not file.is_file():
        return None, [Problem(file, None, "", "is missing: every lesson directory needs one")]
    lesson, tree, problems = parse_model(Lesson, file)
    if lesson is None:
        return None, problems
    problems = check_lesson(lesson, tree, file, match["slug"])
    if any(not problem.warning for problem in problems):
        return None, problems
    starter_code = {}
    for exercise in lesson.exercises:
        code = _read_starter(directory / "exercises" / exercise.id)
        if code is None:
            folder = directory / "exercises" / exercise.id
            return None, [
                Problem(file, None, "exercises", f"{folder}/starter.py is unreadable or too large")
            ]
        starter_code[exercise.id] = code
    stamps = staleness.read(directory)
    stale = {locale: set(paths) for locale, paths in staleness.stale_fields(lesson, stamps).items()}
    translated: dict[str, dict[str, str]] = {}
    for exercise in lesson.exercises:
        found = starters.read_translations(directory / "exercises" / exercise.id)
        english = starter_code[exercise.id]
        translated[exercise.id] = starters.usable(stamps, exercise.id, english, found)
        for locale in set(found) - set(translated[exercise.id]):  # stale, or its code differs
            stale.setdefault(locale, set()).add(starters.field_path(exercise.id))
    loaded = LoadedLesson(
        lesson,
        int(match["number"]),
        directory,
        file,
        starter_code,
        {locale: frozenset(paths) for locale, paths in stale.items()},
        translated,
    )
    return loaded, problems  # warnings only


def _fallback_course(lessons: list[LoadedLesson]) -> Course:
    # model_construct: a course with no lesson at all is still a page that says so.
    return Course.model_construct(
        id="course",
        title=Text(en="Course"),
        summary=Text(en="The course overview could not be loaded; the lessons are listed below."),
        lessons=[loaded.id for loaded in lessons],
        faq=[],
    )


def load_catalog(lessons_dir: Path) -> Catalog:
    """Load the course and every lesson under `lessons_dir`; never raises for content problems."""
    problems: list[Problem] = []
    warnings: list[Problem] = []
    found: dict[str, LoadedLesson] = {}
    directories = sorted(p for p in lessons_dir.glob("*") if p.is_dir())
    broken_slugs: set[str] = set()
    for directory in directories:
        if directory.name.startswith((".", "_")) or directory.name == "schema":
            continue
        loaded, lesson_problems = load_lesson(directory)
        problems += [problem for problem in lesson_problems if not problem.warning]
        warnings += [problem for problem in lesson_problems if problem.warning]
        if loaded is not None:
            found[loaded.id] = loaded
        elif (match := LESSON_DIR_PATTERN.match(directory.name)) is not None:
            broken_slugs.add(match["slug"])

    course_file = lessons_dir / COURSE_FILE
    if course_file.is_file():
        course, tree, course_problems = parse_model(Course, course_file)
    else:
        course, tree, course_problems = None, None, [Problem(course_file, None, "", "is missing")]
    if course is not None:
        course_problems += _duplicates(course_file, tree, course.faq, ("faq",))
    problems += course_problems
    if course is None:
        course = _fallback_course(sorted(found.values(), key=lambda item: item.number))

    ordered: dict[str, LoadedLesson] = {}
    unavailable: list[str] = []
    for index, lesson_id in enumerate(course.lessons):
        if lesson_id in found:
            ordered[lesson_id] = found[lesson_id]
            continue
        unavailable.append(lesson_id)
        if lesson_id not in broken_slugs:
            loc = ("lessons", index)
            problems.append(
                Problem(
                    course_file,
                    line_of(tree, loc),
                    format_loc(loc),
                    f"names the lesson {lesson_id!r}, but there is no "
                    f"lessons/NN-{lesson_id}/{LESSON_FILE}",
                )
            )
    for lesson_id, loaded in found.items():
        if lesson_id not in ordered:
            problems.append(
                Problem(
                    course_file,
                    line_of(tree, ("lessons",)),
                    "lessons",
                    f"does not list the lesson {lesson_id!r} ({display_path(loaded.file)}): "
                    "add it so learners can reach it",
                )
            )
    return Catalog(
        lessons_dir, course, ordered, tuple(unavailable), tuple(problems), tuple(warnings)
    )
