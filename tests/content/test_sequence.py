"""A lesson's `sequence` interleaves steps, questions and exercises in the author's order: the
loader keeps it, the validator names each wrong entry with its line, the JSON Schema offers it,
the API serves it, and a lesson without one keeps its old order (steps, quiz, exercises)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.content.loader import load_catalog
from app.content.localized import localize_lesson
from app.content.schemas import json_schema
from app.learning.standing import CardKind, lesson_standing
from tests.content.test_validate import edit, line_number, validate

INTERLEAVED = """sequence:
  - step: one
  - question: count
  - step: two
  - exercise: hello
  - step: three
quiz:
"""


def interleave(lessons_dir: Path, sequence: str = INTERLEAVED) -> Path:
    file = lessons_dir / "02-second-lesson" / "lesson.yaml"
    edit(file, "quiz:\n", sequence)
    return file


def test_a_lesson_without_a_sequence_keeps_the_old_order(lessons_copy: Path) -> None:
    lesson = load_catalog(lessons_copy).lessons["second-lesson"].lesson
    assert lesson.sequence is None
    assert lesson.cards() == [
        ("step", "one"),
        ("step", "two"),
        ("step", "three"),
        ("question", "count"),
        ("exercise", "hello"),
    ]


def test_the_sequence_sets_the_order_the_api_serves(lessons_copy: Path) -> None:
    interleave(lessons_copy)
    catalog = load_catalog(lessons_copy)
    assert catalog.problems == ()
    loaded = catalog.lessons["second-lesson"]
    expected = [
        ("step", "one"),
        ("question", "count"),
        ("step", "two"),
        ("exercise", "hello"),
        ("step", "three"),
    ]
    assert loaded.lesson.cards() == expected
    localized = localize_lesson(loaded, "tr")
    assert [(card.kind, card.id) for card in localized.sequence] == expected
    # The content itself is where it always was.
    assert [step.id for step in localized.steps] == ["one", "two", "three"]


@pytest.mark.parametrize(
    ("sequence", "fragment", "field", "message"),
    [
        (
            INTERLEAVED.replace("question: count", "question: total"),
            "question: total",
            "sequence[1].question",
            "'total' is not in `quiz`: use the id of one of the lesson's quiz (count)",
        ),
        (
            INTERLEAVED.replace("  - step: three\n", "  - step: one\n  - step: three\n"),
            "step: three",
            "sequence[4].step",
            "'one' is listed twice (first at sequence[0]); list each card once",
        ),
        (
            INTERLEAVED.replace("  - step: two\n", "  - {step: two, exercise: hello}\n"),
            "{step: two, exercise: hello}",
            "sequence[2]",
            "each entry names exactly one card: `step: <id>`, `question: <id>` or `exercise: <id>`",
        ),
    ],
    ids=["unknown id", "listed twice", "two kinds in one entry"],
)
def test_a_wrong_entry_is_named_with_its_line(
    lessons_copy: Path,
    capsys: pytest.CaptureFixture[str],
    sequence: str,
    fragment: str,
    field: str,
    message: str,
) -> None:
    file = interleave(lessons_copy, sequence)
    code, lines = validate(lessons_copy, capsys)
    assert code == 1
    line = line_number(file, fragment)
    if field == "sequence[4].step":  # the second mention of `one` is the line before `three`
        line -= 1
    assert f"{file}:{line}: {field}: {message}" in lines, lines


def test_a_card_left_out_is_named(lessons_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = interleave(lessons_copy, INTERLEAVED.replace("  - exercise: hello\n", ""))
    code, lines = validate(lessons_copy, capsys)
    assert code == 1
    assert lines == [
        f"{file}:{line_number(file, 'sequence:')}: sequence: leaves out the exercises "
        "hello: add `- exercise: <id>` where the learner should meet each"
    ]
    # The broken lesson is left out; the other one still serves.
    assert list(load_catalog(lessons_copy).lessons) == ["first-steps"]


def test_the_json_schema_offers_the_sequence() -> None:
    schema = json_schema("lesson")
    sequence = schema["properties"]["sequence"]  # type: ignore[index]
    item = schema["$defs"]["SequenceItem"]  # type: ignore[index]
    assert "interleaved" in sequence["description"]
    assert set(item["properties"]) == {"step", "question", "exercise"}
    assert item["additionalProperties"] is False


def test_continue_follows_the_sequence() -> None:
    """Two steps read and the question answered: the next card is the exercise that the
    sequence puts before the third step, not the third step."""
    cards: list[tuple[CardKind, str]] = [
        ("step", "one"),
        ("question", "count"),
        ("step", "two"),
        ("exercise", "hello"),
        ("step", "three"),
    ]
    state = {
        "completed_steps": ["one", "two"],
        "quiz": {"answers": {"count": "b"}, "correct_questions": ["count"]},
        "exercises": {},
        "last_step": "two",
    }
    standing = lesson_standing(
        state,
        lesson_id="second-lesson",
        step_ids=["one", "two", "three"],
        question_ids=["count"],
        exercise_slugs=["hello"],
        cards=cards,
    )
    assert (standing.next_card, standing.next_kind, standing.next_card_id) == (
        4,
        "exercise",
        "hello",
    )
    assert standing.next_step == 3  # the old field keeps its meaning: the third step
