"""The instructors' concepts: enough of them, in every language, covering every glossary term and
the subject of every check; found by the rare term asked (BM25 with stemming, per language) and
answered with their own text and the step that teaches them; an honest "not covered" otherwise;
validated with file and line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from app.coach.builtin import BuiltinCoach
from app.coach.concepts import get_concepts
from app.coach.index import get_index
from app.config import REPO_ROOT
from app.content.__main__ import main
from app.content.conceptcheck import sentences
from app.content.service import get_catalog
from app.i18n import SUPPORTED_LOCALES

GLOSSARY = REPO_ROOT / "docs" / "glossary.md"


def concepts() -> list[tuple[str, object]]:
    return [
        (loaded.id, concept)
        for loaded in get_catalog().ordered
        for concept in loaded.lesson.concepts
    ]


def test_forty_concepts_written_in_every_language() -> None:
    found = get_catalog().ordered
    assert sum(len(loaded.lesson.concepts) for loaded in found) >= 40
    assert all(loaded.lesson.concepts for loaded in found)
    for loaded in found:
        step_ids = {step.id for step in loaded.lesson.steps}
        for concept in loaded.lesson.concepts:
            assert set(concept.steps) <= step_ids, concept.id
            for locale in SUPPORTED_LOCALES:
                assert concept.terms.get(locale), (concept.id, locale)
                text = concept.answer.get(locale)
                assert text and 2 <= sentences(text) <= 5, (concept.id, locale)
                assert not text.rstrip().endswith(":"), (concept.id, locale)


def test_every_glossary_term_is_named_by_a_concept() -> None:
    named = " ".join(
        " ".join([*(term for terms in concept.terms.values() for term in terms), concept.answer.en])
        for _, concept in concepts()  # type: ignore[attr-defined]
    ).lower()
    rows = [
        line for line in GLOSSARY.read_text(encoding="utf-8").splitlines() if line.startswith("| ")
    ]
    terms = [row.split("|")[1].strip() for row in rows if not row.startswith(("| en ", "|---"))]
    missing = [
        first
        for term in terms
        if (first := re.split(r"[,/(]", term)[0].strip().strip("`").lower()) and first not in named
    ]
    assert len(terms) >= 50 and missing == []


def test_every_check_has_a_concept_on_its_subject() -> None:
    every_term = {term for _, concept in concepts() for term in concept.terms["en"]}  # type: ignore[attr-defined]
    for loaded in get_catalog().ordered:
        taught = {step for concept in loaded.lesson.concepts for step in concept.steps}
        for exercise in loaded.lesson.exercises:
            for check_id in exercise.grading.checks:
                levels = exercise.hint_levels[check_id]
                assert levels.step in taught or check_id in every_term, (exercise.id, check_id)


@pytest.mark.parametrize(
    ("question", "locale", "lesson", "concept"),
    [
        ("what is a bucket?", "en", "data-vs-model-parallelism", "bucket"),
        ("What is the step of a bucket?", "en", "ddp-fundamentals", "bucket"),
        ("async_op ne işe yarar?", "tr", "data-vs-model-parallelism", "async-handle"),
        ("set_epoch neden gerekli", "tr", "ddp-fundamentals", "set-epoch"),
        ("sarmalanmis model nedir", "tr", "ddp-fundamentals", "ddp"),
        ("o que é um snapshot?", "pt-BR", "torchrun-launch", "restart-and-snapshot"),
        ("para que serve o SyncBatchNorm?", "pt-BR", "syncbn-sharded-state", "sync-batchnorm"),
        (
            "como funciona o acumulo de gradientes",
            "pt-BR",
            "ddp-fundamentals",
            "gradient-accumulation",
        ),
        ("what does weights_only do in torch.load", "en", "ddp-fundamentals", "safe-loading"),
    ],
)
def test_the_rare_term_asked_finds_its_concept(
    question: str, locale: str, lesson: str, concept: str
) -> None:
    hit = get_concepts().search(question, locale, lesson)
    assert hit is not None and hit.concept.id == concept


def test_a_concept_is_answered_with_its_own_text_and_its_step() -> None:
    coach = BuiltinCoach(get_index(), "pt-BR")
    answer = coach.about_topic("o que é um bucket?", "data-vs-model-parallelism")
    bucket = next(concept for _, concept in concepts() if concept.id == "bucket")  # type: ignore[attr-defined]
    assert bucket.answer.get("pt-BR") in answer.markdown
    assert answer.sources[0].step_id == "buckets-in-ready-order"
    assert "#step-buckets-in-ready-order" in answer.markdown


@pytest.mark.parametrize(
    ("question", "locale"),
    [
        ("how do I bake bread?", "en"),
        ("en iyi pizza tarifi nedir", "tr"),
        ("qual a capital da Austrália?", "pt-BR"),
    ],
)
def test_nothing_matching_is_said_plainly(question: str, locale: str) -> None:
    assert get_concepts().search(question, locale, "ddp-fundamentals") is None
    answer = BuiltinCoach(get_index(), locale).about_topic(question, "ddp-fundamentals")
    assert not answer.covered and answer.sources == []


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(REPO_ROOT / "lessons", target)
    return target


def test_a_concept_with_a_wrong_step_or_an_excerpt_is_reported_with_its_line(
    lessons: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = lessons / "02-ddp-fundamentals" / "lesson.yaml"
    text = file.read_text(encoding="utf-8")
    text = text.replace("    steps: [clean-up]\n", "    steps: [clean-upp]\n", 1)
    start = text.index('      en: "`dist.destroy_process_group()` releases')
    end = text.index("\n", start)
    text = text[:start] + '      en: "To clean up, call this:"' + text[end:]
    file.write_text(text, encoding="utf-8")
    assert main(["validate", "--lessons-dir", str(lessons)]) == 1
    lines = capsys.readouterr().out.splitlines()
    numbered = text.splitlines()
    step_line = next(n for n, line in enumerate(numbered, 1) if "clean-upp" in line)
    answer_line = next(n for n, line in enumerate(numbered, 1) if "To clean up, call this" in line)
    assert any(
        line.startswith(f"{file}:{step_line}: concepts[") and "'clean-upp' is not a step" in line
        for line in lines
    ), lines
    assert any(
        line.startswith(f"{file}:{answer_line}: concepts[")
        and "answer.en: is 0 sentence(s)" in line
        for line in lines
    ), lines
