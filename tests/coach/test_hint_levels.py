"""Hint levels in the lesson YAML: authored in every locale, validated with file, line and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.config import REPO_ROOT
from app.content.__main__ import main
from app.content.loader import load_catalog
from app.content.service import get_catalog
from app.i18n import SUPPORTED_LOCALES


def test_every_check_of_every_exercise_has_levels_written_in_every_locale() -> None:
    exercises = 0
    for loaded in get_catalog().ordered:
        step_ids = {step.id for step in loaded.lesson.steps}
        for exercise in loaded.lesson.exercises:
            assert list(exercise.hint_levels) and set(exercise.hint_levels) == set(
                exercise.grading.checks
            ), exercise.id
            for check_id, levels in exercise.hint_levels.items():
                assert levels.step is None or levels.step in step_ids
                texts = [levels.nudge, levels.pointer, levels.fix]
                for text in texts:
                    assert all(text.get(locale) for locale in SUPPORTED_LOCALES), check_id
                for locale in SUPPORTED_LOCALES:  # three different levels, not one text thrice
                    assert len({text.get(locale) for text in texts}) == 3, (check_id, locale)
            exercises += 1
    assert exercises >= 8


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(REPO_ROOT / "lessons", target)
    return target


def validate(
    lessons_dir: Path, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, list[str]]:
    code = main(["validate", "--lessons-dir", str(lessons_dir), *flags])
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
    assert all(line.startswith(f"{file}:") for line in lines)
    assert any(
        "exercises[0].hint_levels: names checks that are not in `grading.checks`: ddp.wrapd" in line
        for line in lines
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


def test_an_exercise_whose_checks_lack_levels_is_refused(
    lessons: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = lessons / "02-ddp-fundamentals" / "lesson.yaml"
    text = file.read_text(encoding="utf-8")
    start = text.index("      accum.grad_mean:\n", text.index("  - id: accumulate"))
    end = text.index("    grading:\n", start)
    file.write_text(text[:start] + text[end:], encoding="utf-8")
    code, lines = validate(lessons, capsys)
    assert code == 1
    hint_levels = line_of_after(file, "  - id: accumulate", "    hint_levels:")
    assert lines == [
        f"{file}:{hint_levels}: exercises[1].hint_levels: exercise 'accumulate' has no hint "
        "levels for the checks accum.grad_mean: add nudge, pointer and fix for each, "
        "in en, tr, pt-BR"
    ]


def test_an_exercise_without_any_levels_is_refused(
    lessons: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = lessons / "04-torchrun-launch" / "lesson.yaml"
    text = file.read_text(encoding="utf-8")
    start = text.index("    hint_levels:\n", text.index("  - id: env-launch"))
    end = text.index("    grading:\n", start)
    file.write_text(text[:start] + text[end:], encoding="utf-8")
    code, lines = validate(lessons, capsys)
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith(f"{file}:{line_of(file, '  - id: env-launch')}: exercises[0]")
    assert "run.completed, launch.env, launch.multinode, dist.cleanup" in lines[0]


def test_a_level_missing_a_language_is_a_warning_and_strict_refuses_it(
    lessons: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lesson keeps serving (the coach shows the English level); CI runs --strict."""
    file = lessons / "03-syncbn-sharded-state" / "lesson.yaml"
    text = file.read_text(encoding="utf-8")
    start = text.index("      syncbn.before_wrap:\n")
    pointer = text.index("        pointer:\n", start)
    turkish = text.index("          tr: ", pointer)
    file.write_text(text[:turkish] + text[text.index("\n", turkish) + 1 :], encoding="utf-8")
    at = line_of_after(file, "      syncbn.before_wrap:", "        pointer:")
    expected = [
        f"{file}:{at}: exercises[0].hint_levels.syncbn.before_wrap.pointer: warning: has no tr: "
        "the coach shows the English there until it is written"
    ]
    assert validate(lessons, capsys) == (0, expected)
    assert validate(lessons, capsys, "--strict") == (1, expected)
    assert "syncbn-sharded-state" in load_catalog(lessons).lessons


def line_of_after(file: Path, anchor: str, fragment: str) -> int:
    lines = file.read_text(encoding="utf-8").splitlines()
    # the last `anchor`: a quiz question may share an exercise's id, and exercises come last
    first = max(number for number, line in enumerate(lines, start=1) if line == anchor)
    return next(
        number for number, line in enumerate(lines, start=1) if number > first and line == fragment
    )


def test_a_nudge_holding_code_of_the_solution_is_refused(
    lessons: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = lessons / "02-ddp-fundamentals" / "lesson.yaml"
    text = file.read_text(encoding="utf-8")
    start = text.index("      accum.grad_mean:\n", text.index("  - id: accumulate"))
    nudge = text.index("          pt-BR: ", text.index("        nudge:\n", start))
    end = text.index("\n", nudge)
    # The solution's condition, spaced and commented otherwise than in solution.py.
    leaky = '          pt-BR: "Quando `(i+1) % ACCUM_STEPS==0` é verdade?"'
    file.write_text(text[:nudge] + leaky + text[end:], encoding="utf-8")
    code, lines = validate(lessons, capsys)
    assert code == 1
    at = line_of_after(file, "      accum.grad_mean:", "        nudge:")
    assert lines == [
        f"{file}:{at}: exercises[1].hint_levels.accum.grad_mean.nudge: the pt-BR nudge holds "
        "code of the solution ((i+1) % ACCUM_STEPS==0): a nudge points at what to look at; "
        "move the code to the pointer or the fix"
    ]


def test_a_nudge_may_name_an_api_and_quote_the_starter(tmp_path: Path) -> None:
    from app.content.codeleak import solution_code_in

    solution = "sampler = DistributedSampler(dataset, shuffle=False)  # the shards\nmodel.train()\n"
    starter = "loader = DataLoader(dataset, batch_size=8)\n"
    assert (
        solution_code_in("Which `DistributedSampler` hands out the data?", solution, starter) == []
    )
    assert solution_code_in("Look at `DataLoader(dataset, batch_size=8)`.", solution, starter) == []
    assert solution_code_in(
        "Try `DistributedSampler(dataset, shuffle=False)`.", solution, starter
    ) == ["DistributedSampler(dataset, shuffle=False)"]
    assert solution_code_in(
        "sampler  =  DistributedSampler( dataset, shuffle=False )", solution, starter
    ) == ["sampler=DistributedSampler(dataset,shuffle=False)"]
