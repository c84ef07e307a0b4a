"""The free-text intents held against a paraphrase corpus (corpus/intents.yaml): at least 30
phrasings per intent and language, each heard as its intent with and without its diacritics, and
each question's language told from its words (not from the page)."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from app.coach.intent import classify
from app.coach.language import detect
from app.i18n import SUPPORTED_LOCALES

CORPUS = Path(__file__).parent / "corpus" / "intents.yaml"


def corpus() -> dict[str, dict[str, list[str]]]:
    loaded: Any = YAML(typ="safe").load(CORPUS.read_text(encoding="utf-8"))
    return dict(loaded)


def bare(text: str) -> str:
    """As typed on a keyboard without the language's letters."""
    decomposed = unicodedata.normalize("NFKD", text.replace("ı", "i").replace("İ", "I"))
    return "".join(char for char in decomposed if not unicodedata.combining(char))


CASES = [
    (locale, intent, phrasing)
    for locale, intents in corpus().items()
    for intent, phrasings in intents.items()
    for phrasing in phrasings
]


def test_the_corpus_has_30_phrasings_per_intent_and_language() -> None:
    loaded = corpus()
    assert set(loaded) == set(SUPPORTED_LOCALES)
    intents = {"why_failed", "hint", "still_stuck", "give_answer", "run_line"}
    for locale, by_intent in loaded.items():
        assert set(by_intent) == intents, locale
        for intent, phrasings in by_intent.items():
            assert len(set(phrasings)) >= 30, (locale, intent)
    assert bare("Hâlâ anlamadım") == "Hala anlamadim"


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
def test_every_phrasing_is_heard_as_its_intent_with_and_without_diacritics(locale: str) -> None:
    wrong = [
        (form, intent, classify(form).kind)
        for where, intent, phrasing in CASES
        if where == locale
        for form in {phrasing, bare(phrasing)}
        if classify(form).kind != intent
    ]
    assert wrong == []


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
def test_every_phrasing_is_told_to_be_in_its_language(locale: str) -> None:
    """Never another of our languages; the few too short to tell (`dica?`) are None."""
    told = [
        (form, detect(form))
        for where, _, phrasing in CASES
        if where == locale
        for form in {phrasing, bare(phrasing)}
    ]
    wrong = [(form, said) for form, said in told if said not in (locale, None)]
    unknown = [form for form, said in told if said is None]
    assert wrong == []
    assert len(unknown) <= len(told) // 10, unknown
