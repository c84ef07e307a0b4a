"""Hint levels in the lesson YAML: authored in every locale, validated with file, line and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.config import REPO_ROOT
from app.content.__main__ import main
from app.content.service import get_catalog
from app.i18n import SUPPORTED_LOCALES


def test_every_shipped_hint_level_is_written_in_every_locale() -> None:
    authored = 0
    for loaded in get_catalog().ordered:
        step_ids = {step.id for step in loaded.lesson.steps}
        for exercise in loaded.lesson.exercises:
            for check_id, levels in exercise.hint_levels.items():
                assert check_id in exercise.grading.checks
                assert levels.step in step_ids
                for text in (levels.nudge, levels.pointer, levels.fix):
                    assert all(text.get(locale) for locale in SUPPORTED_LOCALES), check_id
                authored += 1
    assert authored >= 7


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(REPO_ROOT / "lessons", target)
    return target


def validate(lessons_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["validate", "--lessons-dir", str(lessons_dir)])
    return code, capsys.readouterr().out.splitlines()


def line_of(file: Path, fragment: str) -> int:
    lines = file.read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, start=1) if fragment in line)


def edit_lesson_two(lessons: Path, old: str, new: str) -> Path:
    file = lessons / "02-ddp-fundamentals" / "lesson.yaml"
    text = file.read_text(encoding="utf-8")
    assert old in text
    file.write_text(text.replace(old, new, 1), encoding="utf-8")
    return file


def test_a_level_for_a_check_that_is_not_graded_is_reported(
    lessons: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = edit_lesson_two(
        lessons, "      ddp.wrapped:\n        step:", "      ddp.wrapd:\n        step:"
    )
    code, lines = validate(lessons, capsys)
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith(f"{file}:")
    assert (
        "exercises[0].hint_levels: names checks that are not in `grading.checks`: ddp.wrapd"
        in lines[0]
    )


def test_a_level_linking_a_step_that_does_not_exist_is_reported(
    lessons: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = edit_lesson_two(
        lessons, "        step: gradient-sync\n", "        step: gradient-sink\n"
    )
    code, lines = validate(lessons, capsys)
    assert code == 1
    assert lines == [
        f"{file}:{line_of(file, 'step: gradient-sink')}: "
        "exercises[0].hint_levels.ddp.grad_average.step: "
        "'gradient-sink' is not a step of this lesson: use one of its step ids"
    ]
