"""Translations that say when they are stale: `validate --update` records which English each
translation was made from (translated-from.json), `validate` lists the stale ones, and the page
shows English with the untranslated notice for them. On a temporary copy of the fixture lessons."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.content import service as content
from app.content import staleness
from app.content.__main__ import main
from app.content.loader import load_catalog
from tests.content.test_validate import edit

BODY_EN = 'en: "Say *hello*."'
STALE = "steps.hello.body"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["validate", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def lesson_file(lessons: Path) -> Path:
    return lessons / "01-first-steps" / "lesson.yaml"


@pytest.fixture
def stamped(lessons_copy: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    code, out, err = run(capsys, "--lessons-dir", str(lessons_copy), "--update")
    assert code == 0 and out == []
    assert "0 stale translations" in err
    assert "01-first-steps/translated-from.json: updated" in err
    return lessons_copy


def test_update_records_the_english_each_translation_was_made_from(stamped: Path) -> None:
    data = json.loads((stamped / "01-first-steps" / staleness.SIDECAR).read_text())
    assert data["fields"][STALE] == {
        "tr": [staleness.digest("Say *hello*."), staleness.digest("*Merhaba* de.")],
        "pt-BR": [staleness.digest("Say *hello*."), staleness.digest("Diga *olá*.")],
    }
    # Every translated field of the lesson, by the paths the pages use; English-only ones not.
    assert "quiz.greeting.choices.b.text" in data["fields"]
    assert "quiz.greeting.explanation" in data["fields"]
    second = json.loads((stamped / "02-second-lesson" / staleness.SIDECAR).read_text())
    assert "steps.two.title" not in second["fields"]  # English only: nothing to go stale
    assert set(second["fields"]["steps.one.body"]) == {"tr"}


def test_an_english_edit_makes_its_translations_stale(
    stamped: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(lesson_file(stamped), BODY_EN, 'en: "Say *hello* to every rank."')
    code, out, err = run(capsys, "--lessons-dir", str(stamped))
    assert code == 0  # stale is not broken: the page shows English meanwhile
    assert "2 stale translations" in err
    assert [line.split(": ")[1:3] for line in out] == [
        [STALE, "the pt-BR translation is stale"],
        [STALE, "the tr translation is stale"],
    ]
    assert "validate --update --accept first-steps:steps.hello.body" in out[0]
    loaded = load_catalog(stamped).lessons["first-steps"]
    assert loaded.stale == {"tr": frozenset({STALE}), "pt-BR": frozenset({STALE})}


def test_a_new_translation_is_current_and_update_keeps_the_rest_stale(
    stamped: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(lesson_file(stamped), BODY_EN, 'en: "Say *hello* to every rank."')
    edit(lesson_file(stamped), 'tr: "*Merhaba* de."', 'tr: "Her rank\'e *merhaba* de."')
    assert load_catalog(stamped).lessons["first-steps"].stale["tr"] == frozenset()
    code, out, _ = run(capsys, "--lessons-dir", str(stamped), "--update")
    assert code == 0
    assert [line.split(": ")[1:3] for line in out] == [[STALE, "the pt-BR translation is stale"]]
    # The author says the Portuguese still fits the new English: stamped, no longer stale.
    accept = f"first-steps:{STALE}"
    code, out, _ = run(capsys, "--lessons-dir", str(stamped), "--update", "--accept", accept)
    assert code == 0
    assert out == []


def test_without_a_readable_record_nothing_is_stale(lessons_copy: Path) -> None:
    edit(lesson_file(lessons_copy), BODY_EN, 'en: "Say *hello* to every rank."')
    assert load_catalog(lessons_copy).lessons["first-steps"].stale["tr"] == frozenset()
    (lessons_copy / "01-first-steps" / staleness.SIDECAR).write_text("{not json")
    assert load_catalog(lessons_copy).lessons["first-steps"].stale["tr"] == frozenset()


def test_the_page_shows_english_and_the_notice_for_a_stale_field(
    stamped: Path, client: TestClient, use_lessons: Callable[[Path], None]
) -> None:
    use_lessons(stamped)
    page = client.get("/lessons/first-steps?locale=tr").text
    assert 'data-testid="fallback-notice"' not in page
    assert "<em>Merhaba</em> de." in page
    edit(lesson_file(stamped), BODY_EN, 'en: "Say *hello* to every rank."')
    content.reset()  # the catalog looks for edits once a second; a test does not wait
    page = client.get("/lessons/first-steps?locale=tr").text
    assert 'data-testid="fallback-notice"' in page
    assert "Say <em>hello</em> to every rank." in page
    assert "<em>Merhaba</em> de." not in page
    assert "Merhaba" in page  # the other step titles stay in Turkish
    api = client.get("/api/v1/lessons/first-steps?locale=tr").json()
    assert api["fallback_fields"] == [STALE]


def test_a_stale_quiz_explanation_is_given_in_english(
    stamped: Path, client: TestClient, use_lessons: Callable[[Path], None]
) -> None:
    use_lessons(stamped)
    url = "/api/v1/quiz/first-steps/greeting?locale=tr"
    assert client.post(url, json={"choice": "a"}).json()["explanation"] == "Merhaba ile başlarız."
    edit(lesson_file(stamped), "en: We start with hello.", "en: Every talk starts with hello.")
    content.reset()
    assert client.post(url, json={"choice": "a"}).json()["explanation"] == (
        "Every talk starts with hello."
    )
