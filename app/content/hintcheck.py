"""The coach's hint levels of an exercise, checked: every graded check has a nudge, a pointer
and a fix, each naming a step of the lesson, and no nudge gives the solution's code away.

A level not yet written in some supported locale is a warning, not an error: the coach shows
it in English meanwhile, so a language being added (docs/translating.md) never takes a lesson
offline. `python -m app.content validate --strict` (CI, for the shipped locales) fails on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.content.codeleak import solution_code_in
from app.content.schemas import Exercise, Text
from grader.i18n import LOCALES

HINT_LEVELS = ("nudge", "pointer", "fix")
Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Issue:
    loc: Loc  # the field path in the lesson file
    text: str
    warning: bool = False


def hint_level_issues(
    index: int, exercise: Exercise, step_ids: set[str], folder: Path, starter: str | None
) -> list[Issue]:
    """What is wrong (or only untranslated) in the hint levels of the lesson's `index`th
    exercise, whose files are in `folder`."""
    issues: list[Issue] = []
    missing = [check for check in exercise.grading.checks if check not in exercise.hint_levels]
    if missing:
        issues.append(
            Issue(
                ("exercises", index, "hint_levels"),
                f"exercise {exercise.id!r} has no hint levels for the checks "
                f"{', '.join(missing)}: add nudge, pointer and fix for each, "
                f"in {', '.join(LOCALES)}",
            )
        )
    for check_id, levels in exercise.hint_levels.items():
        where: Loc = ("exercises", index, "hint_levels", check_id)
        for name in HINT_LEVELS:
            text: Text = getattr(levels, name)
            untranslated = [locale for locale in LOCALES if not text.get(locale)]
            if untranslated:
                issues.append(
                    Issue(
                        (*where, name),
                        f"has no {', '.join(untranslated)}: the coach shows the English there "
                        "until it is written",
                        warning=True,
                    )
                )
        if levels.step is not None and levels.step not in step_ids:
            issues.append(
                Issue(
                    (*where, "step"),
                    f"{levels.step!r} is not a step of this lesson: use one of its step ids",
                )
            )
    return issues + _nudge_issues(index, exercise, folder, starter)


def _nudge_issues(index: int, exercise: Exercise, folder: Path, starter: str | None) -> list[Issue]:
    """A nudge (the coach's first level) holds no code of the exercise's solution: that belongs
    to the pointer or the fix."""
    try:
        solution = (folder / "solution.py").read_text(encoding="utf-8")
    except OSError:
        return []  # reported as a missing file
    issues = []
    for check_id, levels in exercise.hint_levels.items():
        for locale in LOCALES:
            found = solution_code_in(levels.nudge.get(locale) or "", solution, starter or "")
            if found:
                issues.append(
                    Issue(
                        ("exercises", index, "hint_levels", check_id, "nudge"),
                        f"the {locale} nudge holds code of the solution ({'; '.join(found)}): a "
                        "nudge points at what to look at; move the code to the pointer or the fix",
                    )
                )
    return issues
