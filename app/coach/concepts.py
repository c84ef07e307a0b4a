"""The instructors' concepts (lesson YAML `concepts:`), found for a question: BM25 over each
concept's terms and answer, per locale, with Snowball stemming for en, tr and pt
(`snowballstemmer`), so the rare word asked about outranks a common one ("what is a bucket?"
finds the bucket, not every step that says "what").

A concept answers only when the question holds one of its terms whole (every word of it, stemmed,
diacritics ignored):
a question that merely shares common words with an answer finds nothing, and the coach says so.
Built from the loaded catalog, again whenever it is reloaded.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

import snowballstemmer

from app.coach.language import STOP_WORDS
from app.content import service as content
from app.content.loader import Catalog
from app.content.schemas import Concept
from app.i18n import SUPPORTED_LOCALES

K1 = 1.5
B = 0.75
TERM_WEIGHT = 3  # a concept's terms count this many times its answer's words
LESSON_BOOST = 1.2  # the asked lesson's concepts, over the others
_STEMMERS = {"en": "english", "tr": "turkish", "pt-BR": "portuguese"}
_TOKEN = re.compile(r"[^\W_]+(?:_[^\W_]+)*", re.UNICODE)


@dataclass(frozen=True)
class ConceptHit:
    lesson_id: str
    concept: Concept
    score: float


def _bare(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word.replace("ı", "i"))
    return "".join(char for char in decomposed if not unicodedata.combining(char))


class _Tokenizer:
    def __init__(self, locale: str) -> None:
        self.stemmer = snowballstemmer.stemmer(_STEMMERS.get(locale, "english"))
        self.stop = STOP_WORDS.get(locale, frozenset()) | STOP_WORDS["en"]

    def __call__(self, text: str) -> list[str]:
        lowered = text.replace("İ", "i").replace("I", "ı") if "İ" in text else text
        words = [word for word in _TOKEN.findall(lowered.lower()) if word not in self.stop]
        # Stemmed without diacritics on both sides: "sarmalanmis" typed bare finds "sarmalanmış".
        stems = self.stemmer.stemWords([_bare(word) for word in words])
        return [_bare(stem) for stem in stems if len(stem) > 1]


@dataclass
class _Document:
    lesson_id: str
    concept: Concept
    counts: Counter[str]
    length: int
    terms: tuple[frozenset[str], ...]  # each term's stemmed words


class ConceptIndex:
    def __init__(self, catalog: Catalog) -> None:
        self._docs: dict[str, list[_Document]] = {}
        self._idf: dict[str, dict[str, float]] = {}
        self._average: dict[str, float] = {}
        self._tokenizers = {locale: _Tokenizer(locale) for locale in SUPPORTED_LOCALES}
        for locale in SUPPORTED_LOCALES:
            tokens = self._tokenizers[locale]
            docs = []
            for loaded in catalog.ordered:
                for concept in loaded.lesson.concepts:
                    words = [tokens(term) for term in _terms(concept, locale)]
                    flat = [token for term in words for token in term]
                    answer = tokens(concept.answer.get(locale) or concept.answer.en)
                    counts = Counter(flat * TERM_WEIGHT + answer)
                    named = tuple(frozenset(term) for term in words if term)
                    docs.append(_Document(loaded.id, concept, counts, sum(counts.values()), named))
            self._docs[locale] = docs
            total = len(docs) or 1
            having = Counter(token for doc in docs for token in doc.counts)
            self._idf[locale] = {
                token: math.log(1 + (total - n + 0.5) / (n + 0.5)) for token, n in having.items()
            }
            self._average[locale] = sum(doc.length for doc in docs) / total

    def search(self, question: str, locale: str, lesson_id: str | None = None) -> ConceptHit | None:
        """The concept the question asks about, or None when none of them is named in it."""
        locale = locale if locale in self._docs else "en"
        query = self._tokenizers[locale](question)
        if not query:
            return None
        idf, average = self._idf[locale], self._average[locale] or 1.0
        best: ConceptHit | None = None
        asked = set(query)
        for doc in self._docs[locale]:
            if not any(term <= asked for term in doc.terms):
                continue  # the question names none of its terms
            score = 0.0
            for token in query:
                frequency = doc.counts.get(token, 0)
                if frequency:
                    norm = K1 * (1 - B + B * doc.length / average)
                    score += idf.get(token, 0.0) * frequency * (K1 + 1) / (frequency + norm)
            if doc.lesson_id == lesson_id:
                score *= LESSON_BOOST
            if best is None or score > best.score:
                best = ConceptHit(doc.lesson_id, doc.concept, score)
        return best

    def all(self) -> list[tuple[str, Concept]]:
        return [(doc.lesson_id, doc.concept) for doc in self._docs["en"]]


def _terms(concept: Concept, locale: str) -> list[str]:
    """The concept's terms in `locale`, and the English ones (API names are typed in English)."""
    own = concept.terms.get(locale, [])
    return [*own, *(term for term in concept.terms.get("en", []) if term not in own)]


_concepts = content.PerCatalog(ConceptIndex)


def get_concepts() -> ConceptIndex:
    """The concepts of the catalog the content service holds now (rebuilt after a reload)."""
    return _concepts.get()
