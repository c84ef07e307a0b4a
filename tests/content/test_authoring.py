"""`python -m app.content new-exercise` and `check-exercise` on a temporary copy of the fixture
lessons: the scaffold is a valid exercise whose solution passes and starter fails, graded for
real through the app's grading seam (bwrap, slow)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.content import authoring
from app.content.__main__ import main
from app.content.loader import load_catalog, load_lesson


def new_exercise(lessons: Path, *args: str) -> int:
    return main(["new-exercise", *args, "--lessons-dir", str(lessons)])


def translate_hints(lesson_file: Path) -> None:
    """What the author does next: write each hint level in Turkish and Portuguese too."""
    text = lesson_file.read_text(encoding="utf-8")
    text = re.sub(
        r'^(\s+)en: "(TODO[^"]*)"$',
        r'\1en: "\2"\n\1tr: "YAPILACAK: \2"\n\1pt-BR: "A FAZER: \2"',
        text,
        flags=re.M,
    )
    lesson_file.write_text(text, encoding="utf-8")


def test_new_exercise_scaffolds_an_entry_a_starter_and_a_solution(
    lessons_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert new_exercise(lessons_copy, "first-steps", "all-reduce") == 0
    assert "check-exercise first-steps/all-reduce" in capsys.readouterr().out
    folder = lessons_copy / "01-first-steps" / "exercises" / "all-reduce"
    assert "init_process_group" in (folder / "solution.py").read_text()
    assert "TODO" in (folder / "starter.py").read_text()
    loaded, problems = load_lesson(lessons_copy / "01-first-steps")
    # The lesson keeps serving; its untranslated hint levels are warnings (--strict fails).
    assert loaded is not None
    assert problems and all(problem.warning for problem in problems)
    assert all("has no tr, pt-BR" in problem.message for problem in problems)
    translate_hints(lessons_copy / "01-first-steps" / "lesson.yaml")
    catalog = load_catalog(lessons_copy)
    assert not catalog.problems and not catalog.warnings
    (exercise,) = catalog.lessons["first-steps"].lesson.exercises
    assert exercise.grading.checks == ["run.completed", "dist.init", "dist.cleanup"]
    missing = authoring.missing_texts(catalog.lessons["first-steps"], "all-reduce")
    assert missing == {
        "tr": ["exercises.all-reduce.title", "exercises.all-reduce.prompt"],
        "pt-BR": ["exercises.all-reduce.title", "exercises.all-reduce.prompt"],
    }


def test_new_exercise_adds_the_exercise_to_the_lessons_sequence(
    lessons_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lesson with a `sequence:` names every exercise in it: the scaffold appends the new one,
    so the lesson stays online."""
    lesson_file = lessons_copy / "01-first-steps" / "lesson.yaml"
    loaded, _ = load_lesson(lessons_copy / "01-first-steps")
    assert loaded is not None
    items = [f"  - step: {step.id}\n" for step in loaded.lesson.steps]
    items += [f"  - question: {question.id}\n" for question in loaded.lesson.quiz]
    items += [f"  - exercise: {exercise.id}\n" for exercise in loaded.lesson.exercises]
    text = lesson_file.read_text(encoding="utf-8")
    head, _, rest = text.partition("\nsteps:")
    lesson_file.write_text(f"{head}\nsequence:\n{''.join(items)}\nsteps:{rest}", encoding="utf-8")
    assert load_lesson(lessons_copy / "01-first-steps")[0] is not None
    assert new_exercise(lessons_copy, "first-steps", "all-reduce") == 0
    assert "added `- exercise: all-reduce` at the end of `sequence:`" in capsys.readouterr().out
    loaded, problems = load_lesson(lessons_copy / "01-first-steps")
    assert loaded is not None, [str(problem) for problem in problems]
    assert loaded.lesson.sequence is not None
    assert loaded.lesson.sequence[-1].exercise == "all-reduce"
    assert all(problem.warning for problem in problems)


def test_new_exercise_refuses_and_touches_nothing(
    lessons_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (lessons_copy / "02-second-lesson" / "lesson.yaml").read_text()
    assert new_exercise(lessons_copy, "no-such-lesson", "x") == 2
    assert new_exercise(lessons_copy, "second-lesson", "hello") == 2  # exists already
    assert new_exercise(lessons_copy, "second-lesson", "Not An Id") == 2
    err = capsys.readouterr().err
    assert "There is no lesson 'no-such-lesson'" in err
    assert "second-lesson/hello exists already" in err
    assert "is not an id" in err
    assert (lessons_copy / "02-second-lesson" / "lesson.yaml").read_text() == before


def test_check_exercise_says_which_exercise_it_cannot_find(
    lessons_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check-exercise", "first-steps/nope", "--lessons-dir", str(lessons_copy)])
    assert code == 2
    assert "No exercise 'first-steps/nope'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.sandbox
def test_check_exercise_grades_the_scaffold(
    lessons_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert new_exercise(lessons_copy, "first-steps", "all-reduce") == 0
    capsys.readouterr()
    check = ["check-exercise", "first-steps/all-reduce", "--lessons-dir", str(lessons_copy)]
    # Graded as it must be; the untranslated hint levels are warnings: listed, exit 0.
    assert main(check) == 0
    out = capsys.readouterr().out
    assert "pass: All 3 checks passed: as it must" in out
    assert "(failed checks: dist.init): as it must" in out
    assert "warnings (the lesson stays online" in out
    assert "warning: " in out and "not ready" not in out
    assert "texts missing in tr: 11" in out
    translate_hints(lessons_copy / "01-first-steps" / "lesson.yaml")
    edit_starter = lessons_copy / "01-first-steps" / "exercises" / "all-reduce" / "starter.py"
    edit_starter.write_text(
        (lessons_copy / "01-first-steps" / "exercises" / "all-reduce" / "solution.py").read_text()
    )
    assert main(check) == 1  # a starter that passes is refused
    assert "pass: All 3 checks passed: it must fail" in capsys.readouterr().out
