"""Retrieval over the shipped lessons: FTS5 with BM25, per locale, excerpts, rebuilt on reload."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.coach.index import StepIndex, get_index
from app.config import REPO_ROOT
from app.content import service as content
from tests.content.conftest import point_app_at


@pytest.mark.parametrize(
    ("locale", "question"),
    [
        ("en", "Why does every epoch see the same order of samples?"),
        ("tr", "Neden her epoch aynı sırayı görüyor?"),
        ("pt-BR", "Por que todas as épocas usam a mesma ordem?"),
    ],
)
def test_the_set_epoch_step_answers_the_reshuffle_question_in_each_language(
    locale: str, question: str
) -> None:
    hits = get_index().search(question, locale, lesson_id="ddp-fundamentals", limit=3)
    assert hits[0].step_id == "set-epoch"
    lesson = content.localized_lesson("ddp-fundamentals", locale)
    step = next(item for item in lesson.steps if item.id == "set-epoch")
    assert hits[0].title == step.title  # the title in the learner's language
    # Its card in the lesson's sequence, as the page's ?step= counts.
    cards = [(card.kind, card.id) for card in lesson.sequence]
    assert hits[0].position == cards.index(("step", "set-epoch")) + 1
    assert 0 < len(hits[0].excerpt) <= 300
    assert [hit.score for hit in hits] == sorted(hit.score for hit in hits)  # best (lowest) first


def test_an_excerpt_is_cut_around_the_matched_words() -> None:
    hit = get_index().search("module prefix checkpoint", "en", lesson_id="ddp-fundamentals")[0]
    assert hit.step_id == "save-on-rank-0"
    assert "module" in hit.excerpt
    assert hit.excerpt.startswith("…") or hit.excerpt.endswith("…")


def test_search_across_the_course_and_within_one_lesson() -> None:
    index = get_index()
    everywhere = index.search("checkpoint barrier rank 0", "en", limit=5)
    assert len({hit.lesson_id for hit in everywhere}) > 1
    within = index.search("checkpoint barrier rank 0", "en", lesson_id="torchrun-launch", limit=5)
    assert within and all(hit.lesson_id == "torchrun-launch" for hit in within)


@pytest.mark.parametrize(
    "query", ['"unbalanced AND OR NEAR(', "steps MATCH 'x'; DROP TABLE steps", "*", "a b"]
)
def test_fts_syntax_in_a_question_is_only_words(query: str) -> None:
    index = get_index()
    index.search(query, "en")  # no sqlite3.OperationalError
    assert index.search("DistributedSampler", "en")  # the table is still there


def test_words_too_short_to_search_find_nothing() -> None:
    assert get_index().search("a b ? !", "en") == []


def test_steps_of_lists_a_lesson_in_order() -> None:
    steps = get_index().steps_of("ddp-fundamentals", "tr")
    lesson = content.localized_lesson("ddp-fundamentals", "tr")
    cards = [(card.kind, card.id) for card in lesson.sequence]
    in_order = [
        (index, card_id) for index, (kind, card_id) in enumerate(cards, 1) if kind == "step"
    ]
    assert [(step.position, step.step_id) for step in steps] == in_order


def test_the_index_is_rebuilt_when_the_lessons_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lessons = tmp_path / "lessons"
    shutil.copytree(REPO_ROOT / "lessons", lessons)
    point_app_at(monkeypatch, lessons)
    monkeypatch.setattr(content, "RELOAD_CHECK_SECONDS", 0.0)
    try:
        before = get_index()
        assert before.search("zeppelinology", "en") == []
        lesson_file = lessons / "02-ddp-fundamentals" / "lesson.yaml"
        text = lesson_file.read_text()
        lesson_file.write_text(text.replace("Reshuffle every epoch", "Reshuffle zeppelinology", 1))
        after = get_index()
        assert after is not before
        hits = after.search("zeppelinology", "en")
        assert [hit.step_id for hit in hits] == ["set-epoch"]
    finally:
        from app.config import get_settings

        get_settings.cache_clear()
        content.reset()


def test_each_step_is_indexed_once_per_locale() -> None:
    catalog = content.get_catalog()
    steps = sum(len(loaded.lesson.steps) for loaded in catalog.ordered)
    assert StepIndex(catalog).size == 3 * steps
