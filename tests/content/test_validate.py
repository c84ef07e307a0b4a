"""`python -m app.content validate` names file, line and field for each problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.content.__main__ import main
from app.content.loader import load_catalog


def edit(file: Path, old: str, new: str) -> None:
    text = file.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {file}"
    file.write_text(text.replace(old, new, 1), encoding="utf-8")


def line_number(file: Path, fragment: str) -> int:
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if fragment in line:
            return number
    raise AssertionError(f"{fragment!r} not in {file}")


def validate(lessons_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["validate", "--lessons-dir", str(lessons_dir)])
    return code, capsys.readouterr().out.splitlines()


def test_the_fixture_lessons_are_valid(lessons_copy: Path, capsys: pytest.CaptureFixture[str]):
    code, lines = validate(lessons_copy, capsys)
    assert (code, lines) == (0, [])


def test_missing_english_text(lessons_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = lessons_copy / "01-first-steps" / "lesson.yaml"
    edit(file, "title: {en: World, tr: Dünya, pt-BR: Mundo}", "title: {tr: Dünya, pt-BR: Mundo}")
    code, lines = validate(lessons_copy, capsys)
    assert code == 1
    assert lines == [
        f"{file}:{line_number(file, 'title: {tr: Dünya')}: steps[1].title.en: "
        "the English text is missing: add `en: ...` (English is required)"
    ]


def test_quiz_answer_that_is_not_a_choice(
    lessons_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = lessons_copy / "02-second-lesson" / "lesson.yaml"
    edit(file, "    answer: b\n", "    answer: d\n")
    code, lines = validate(lessons_copy, capsys)
    assert code == 1
    assert lines == [
        f"{file}:{line_number(file, 'answer: d')}: quiz[0].answer: the answer 'd' is not one "
        "of the choices (a, b, c); set it to the id of the right choice"
    ]


def test_duplicate_step_id(lessons_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = lessons_copy / "02-second-lesson" / "lesson.yaml"
    edit(file, "  - id: three\n", "  - id: one\n")
    code, lines = validate(lessons_copy, capsys)
    assert code == 1
    expected_line = line_number(file, "title: {en: Three") - 1
    assert lines == [
        f"{file}:{expected_line}: steps[2].id: the id 'one' is used twice "
        "(first at steps[0]); ids must be unique"
    ]


def test_yaml_syntax_error(lessons_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = lessons_copy / "01-first-steps" / "lesson.yaml"
    edit(file, 'body: {en: "Then the world."', 'body: Then: the world.\n    x: {en: "Then"')
    code, lines = validate(lessons_copy, capsys)
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith(f"{file}:{line_number(file, 'body: Then: the world.')}: ")
    assert ": steps[1].body: is not valid YAML: " in lines[0]
    assert "mapping values are not allowed here" in lines[0]


def test_exercise_without_solution(lessons_copy: Path, capsys: pytest.CaptureFixture[str]):
    file = lessons_copy / "02-second-lesson" / "lesson.yaml"
    (lessons_copy / "02-second-lesson" / "exercises" / "hello" / "solution.py").unlink()
    code, lines = validate(lessons_copy, capsys)
    assert code == 1
    solution = lessons_copy / "02-second-lesson" / "exercises" / "hello" / "solution.py"
    assert lines == [
        f"{file}:{line_number(file, '- id: hello')}: exercises[0]: exercise 'hello' has no "
        f"solution: add {solution}"
    ]


def test_unknown_field_and_bad_grading_block(
    lessons_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = lessons_copy / "02-second-lesson" / "lesson.yaml"
    edit(file, "duration_minutes: 15", "duraton_minutes: 15")
    edit(file, "limits: {wall_seconds: 60}", "limits: {wall_seconds: -1}")
    code, lines = validate(lessons_copy, capsys)
    assert code == 1
    assert lines == [
        f"{file}:1: duration_minutes: is required",
        f"{file}:{line_number(file, 'duraton_minutes')}: duraton_minutes: is not a known field: "
        "check its spelling and indentation",
        f"{file}:{line_number(file, 'wall_seconds: -1')}: "
        "exercises[0].grading.limits.wall_seconds: input should be greater than 0",
    ]


def test_course_naming_a_missing_lesson(lessons_copy: Path, capsys: pytest.CaptureFixture[str]):
    course = lessons_copy / "course.yaml"
    edit(
        course,
        "lessons: [first-steps, second-lesson]",
        "lessons: [first-steps, second-lesson, gone]",
    )
    code, lines = validate(lessons_copy, capsys)
    assert code == 1
    assert lines == [
        f"{course}:{line_number(course, 'lessons: [')}: lessons[2]: names the lesson 'gone', "
        "but there is no lessons/NN-gone/lesson.yaml"
    ]


def test_yaml_1_2_keeps_no_as_a_string(lessons_copy: Path) -> None:
    catalog = load_catalog(lessons_copy)
    question = catalog.lessons["second-lesson"].lesson.quiz[0]
    assert [choice.text.en for choice in question.choices] == ["2", "3", "no"]


def test_broken_lesson_is_left_out_and_the_rest_loads(lessons_copy: Path) -> None:
    edit(lessons_copy / "02-second-lesson" / "lesson.yaml", "steps:", "steps: [")
    catalog = load_catalog(lessons_copy)
    assert list(catalog.lessons) == ["first-steps"]
    assert catalog.unavailable == ("second-lesson",)
    assert len(catalog.problems) == 1


def test_schema_export(tmp_path: Path, lessons_copy: Path) -> None:
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    from ruamel.yaml import YAML

    for kind, files in (
        ("lesson", sorted(lessons_copy.glob("*/lesson.yaml"))),
        ("course", [lessons_copy / "course.yaml"]),
    ):
        output = tmp_path / f"{kind}.schema.json"
        assert main(["schema", "--for", kind, "-o", str(output)]) == 0
        schema = json.loads(output.read_text(encoding="utf-8"))
        validator = jsonschema_rs.validator_for(schema)
        for file in files:
            data = json.loads(json.dumps(YAML(typ="safe").load(file.read_text("utf-8"))))
            assert validator.is_valid(data), file
        assert not validator.is_valid({"id": "Not A Slug"})
