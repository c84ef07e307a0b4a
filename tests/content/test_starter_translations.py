"""Starters in the learner's language (issue 38, app/content/starters.py): a translated starter is
shown when its code is the English starter's and it is current; a changed English starter (code,
or only its comments since the stamp) or a missing translation gives the English starter, and
the exercise says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.config import REPO_ROOT
from app.content import starters
from app.content.__main__ import validate
from app.content.loader import load_catalog
from app.content.localized import localize_lesson

LESSON = "data-vs-model-parallelism"
EXERCISE = "allreduce-by-hand"
OTHER = "overlap-buckets"  # no translated starter (yet): English, said so


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    copy = tmp_path / "lessons"
    shutil.copytree(REPO_ROOT / "lessons", copy)
    return copy


def exercise(lessons_dir: Path, locale: str, slug: str = EXERCISE) -> tuple[str, bool]:
    loaded = load_catalog(lessons_dir).lessons[LESSON]
    shown = next(e for e in localize_lesson(loaded, locale).exercises if e.slug == slug)
    return shown.starter_code, shown.starter_fallback


def folder(lessons_dir: Path) -> Path:
    return next(lessons_dir.glob(f"*-{LESSON}")) / "exercises" / EXERCISE


def test_the_shipped_translations_have_the_english_code_and_are_shown() -> None:
    english = (folder(REPO_ROOT / "lessons") / "starter.py").read_text("utf-8")
    for locale, words in (("tr", "İki TODO fonksiyonunu doldurun"), ("pt-BR", "Preencha as duas")):
        code, fallback = exercise(REPO_ROOT / "lessons", locale)
        assert words in code and not fallback
        assert code != english and starters.same_code(english, code)
        assert len(code.splitlines()) == len(english.splitlines())
    code, fallback = exercise(REPO_ROOT / "lessons", "en")
    assert code == english and not fallback
    assert exercise(REPO_ROOT / "lessons", "tr", OTHER)[1]  # none: English, and the page says so


def test_a_translation_whose_code_differs_falls_back_to_english(lessons: Path) -> None:
    translated = folder(lessons) / "starter.tr.py"
    translated.write_text(translated.read_text("utf-8").replace("EPOCHS = 2", "EPOCHS = 3"))
    code, fallback = exercise(lessons, "tr")
    assert fallback and code == (folder(lessons) / "starter.py").read_text("utf-8")
    assert exercise(lessons, "pt-BR")[1] is False  # the other language is untouched


def test_an_english_comment_edited_after_the_stamp_makes_the_translation_stale(
    lessons: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert validate(lessons, update=True) == 0  # stamped as shipped: current
    assert not exercise(lessons, "tr")[1]
    english = folder(lessons) / "starter.py"
    english.write_text(english.read_text("utf-8").replace("# per process", "# per rank"))
    assert exercise(lessons, "tr")[1] and exercise(lessons, "pt-BR")[1]
    capsys.readouterr()
    validate(lessons)
    out = capsys.readouterr().out
    assert f"exercises.{EXERCISE}.starter: the tr translation is stale" in out
    translated = folder(lessons) / "starter.tr.py"  # translated again: current once stamped
    translated.write_text(translated.read_text("utf-8").replace("# süreç başına", "# rank başına"))
    assert not exercise(lessons, "tr")[1]
    assert validate(lessons, update=True) == 0
    assert not exercise(lessons, "tr")[1] and exercise(lessons, "pt-BR")[1]


def test_the_shipped_stamps_cover_the_translated_starters() -> None:
    stamps = __import__("json").loads(
        (folder(REPO_ROOT / "lessons").parent.parent / "translated-from.json").read_text("utf-8")
    )["fields"]
    assert set(stamps[starters.field_path(EXERCISE)]) == {"tr", "pt-BR"}
