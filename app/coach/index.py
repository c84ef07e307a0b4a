"""Retrieval over the lesson steps: an in-memory SQLite FTS5 index ranked by BM25, per locale.

The index is embedded (it works the same when the app's database is PostgreSQL) and is built from
the loaded lesson YAML: at start, and again whenever the content service reloads the catalog.
Each step is indexed once per locale, in that locale's text (English where it has no translation).

A query keeps only its informative words (each language's common words are dropped: "qual" no
longer finds "qualquer"), each weighted by how rare it is in the course (a word no step holds
weighs the most), and a hit counts only when it holds more than half of that weight, or a good
part of it with some in its title (a crude stem each: "épocas" finds "época"); hits are ranked
by the weight their title holds, then the weight they hold, then BM25. "A pancake recipe" or
"the capital of Australia" then find nothing instead of the least bad steps.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from app.coach.language import STOP_WORDS
from app.config import REPO_ROOT
from app.content import service as content
from app.content.loader import Catalog
from app.i18n import SUPPORTED_LOCALES

# Title hits count five times a body hit; code snippets count like the body.
_WEIGHTS = "0, 0, 0, 0, 5.0, 1.0"
_TOKEN = re.compile(r"\w{3,}", re.UNICODE)
_MARKDOWN_NOISE = re.compile(r"[`*#>\[\]]+")
MAX_QUERY_TOKENS = 24
MIN_COVERAGE = 0.5
TITLE_COVERAGE = 0.35
# Words of questions that say nothing about the topic, on top of each language's stop words.
_QUESTION_WORDS = frozenset(
    [
        "one",
        "two",
        "three",
        "four",
        "iki",
        "üç",
        "dört",
        "dois",
        "duas",
        "três",
        "quatro",
        "use",
        "using",
        "used",
        "work",
        "works",
        "does",
        "mean",
        "means",
        "happen",
        "happens",
        "need",
        "needs",
        "want",
        "know",
        "exactly",
        "really",
        "thing",
        "things",
        "something",
        "anything",
        "good",
        "best",
        "way",
        "ways",
        "kullan",
        "kullanmak",
        "kullanılır",
        "çalışır",
        "gerek",
        "gerekir",
        "lazım",
        "şey",
        "usar",
        "usa",
        "uso",
        "funciona",
        "precisa",
        "preciso",
        "coisa",
        "vale",
        "pena",
        "quero",
        "sobre",
        "usam",
        "every",
        "each",
        "same",
        "always",
        "todas",
        "todos",
        "mesma",
        "mesmo",
        "cada",
        "sempre",
        "quando",
        "onde",
        "muito",
        "her",
        "aynı",
        "hep",
        "under",
        "over",
        "into",
        "onto",
        "diferenca",
        "diferença",
        "entre",
        "gerekiyor",
        "gerekir",
        "etmek",
        "etmemiz",
        "ediyor",
        "yapmak",
        "yapmalıyım",
        "olmalı",
        "başta",
        "happen",
        "happens",
        "happened",
    ]
)


@dataclass(frozen=True)
class StepHit:
    """A step that answers the query, with a short excerpt around the matched words."""

    lesson_id: str
    step_id: str
    position: int  # 1-based, as the page's ?step= counts
    title: str
    excerpt: str
    score: float


def url_of(lesson_id: str, position: int, step_id: str) -> str:
    """The lesson page at that step."""
    return f"/lessons/{lesson_id}?step={position}#step-{step_id}"


class StepIndex:
    def __init__(self, catalog: Catalog) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute(
            "CREATE VIRTUAL TABLE steps USING fts5("
            "locale UNINDEXED, lesson_id UNINDEXED, step_id UNINDEXED, position UNINDEXED, "
            "title, body, tokenize='unicode61 remove_diacritics 2')"
        )
        rows = []
        for loaded in catalog.ordered:
            # The step's card in the lesson's sequence (steps, questions and exercises).
            cards = loaded.lesson.cards()
            for step in loaded.lesson.steps:
                position = cards.index(("step", step.id)) + 1
                for locale in SUPPORTED_LOCALES:
                    title = step.title.get(locale) or step.title.en
                    body = step.body.get(locale) or step.body.en
                    text = _MARKDOWN_NOISE.sub(" ", body) + "\n" + (step.code or "")
                    rows.append((locale, loaded.id, step.id, position, title, text))
        self._db.executemany("INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?)", rows)
        self.size = len(rows)
        # Per locale: each step's words (for coverage) and its body (for the answer's text).
        self._words: dict[tuple[str, str, str], frozenset[str]] = {}
        self._bodies: dict[tuple[str, str, str], str] = {}
        self._titles: dict[tuple[str, str, str], frozenset[str]] = {}
        self._weights: dict[tuple[str, str], float] = {}
        self._glossary = glossary_words()
        for locale, lesson_id, step_id, _position, title, text in rows:
            self._words[(locale, lesson_id, step_id)] = frozenset(_words(f"{title} {text}"))
            self._titles[(locale, lesson_id, step_id)] = frozenset(_words(title))
        for loaded in catalog.ordered:
            for step in loaded.lesson.steps:
                for locale in SUPPORTED_LOCALES:
                    body = step.body.get(locale) or step.body.en
                    self._bodies[(locale, loaded.id, step.id)] = body

    def search(
        self,
        query: str,
        locale: str,
        *,
        lesson_id: str | None = None,
        limit: int = 3,
        relevant_only: bool = True,
    ) -> list[StepHit]:
        """The best steps for `query` in `locale` (optionally within one lesson), best first;
        with `relevant_only`, only steps that cover the query's informative words."""
        terms = query_terms(query)
        match = _match_expression(terms)
        if match is None:
            return []
        sql = (
            f"SELECT lesson_id, step_id, position, title, "
            f"snippet(steps, 5, '', '', '…', 24), bm25(steps, {_WEIGHTS}) AS score "
            "FROM steps WHERE steps MATCH ? AND locale = ?"
        )
        params: list[object] = [match, locale]
        if lesson_id is not None:
            sql += " AND lesson_id = ?"
            params.append(lesson_id)
        sql += " ORDER BY score LIMIT ?"
        params.append(limit * 4 if relevant_only else limit)
        with self._lock:
            found = self._db.execute(sql, params).fetchall()
        hits = [
            StepHit(lesson, step, int(position), title, " ".join(excerpt.split()), float(score))
            for lesson, step, position, title, excerpt, score in found
        ]
        if relevant_only:
            held = {hit: self._held(terms, hit, locale) for hit in hits}
            relevant = [hit for hit in hits if _relevant(*held[hit])]
            if not relevant:  # a course term asked about in other words: the steps that hold it
                course_terms = [term for term in terms if term in self._glossary]
                relevant = [
                    hit
                    for hit in hits
                    if any(
                        _holds(self._words[(locale, hit.lesson_id, hit.step_id)], term)
                        for term in course_terms
                    )
                ]
            hits = relevant
            # Best first: the weight of the query words in the title, then in the step, then BM25.
            hits.sort(key=lambda hit: (-held[hit][0], -held[hit][1], hit.score))
        return hits[:limit]

    def relevant(self, terms: list[str], hit: StepHit, locale: str) -> bool:
        return _relevant(*self._held(terms, hit, locale))

    def coverage(self, query: str, hit: StepHit, locale: str) -> tuple[float, float]:
        """The share of the query's weight the whole step holds, then the share its title holds."""
        in_title, in_step = self._held(query_terms(query), hit, locale)
        return in_step, in_title

    def _held(self, terms: list[str], hit: StepHit, locale: str) -> tuple[float, float]:
        """The share of the query's weight (a word weighs more the fewer steps hold it; one no
        step holds weighs the most) that the step's title holds, and that the whole step holds."""
        key = (locale, hit.lesson_id, hit.step_id)
        words = self._words.get(key, frozenset())
        title = self._titles.get(key, frozenset())
        weights = {term: self._weight(term, locale) for term in terms}
        total = sum(weights.values()) or 1.0
        return (
            sum(weight for term, weight in weights.items() if _holds(title, term)) / total,
            sum(weight for term, weight in weights.items() if _holds(words, term)) / total,
        )

    def _weight(self, term: str, locale: str) -> float:
        cached = self._weights.get((locale, term))
        if cached is None:
            steps = [words for (loc, *_), words in self._words.items() if loc == locale]
            holding = sum(1 for words in steps if _holds(words, term))
            cached = math.log((len(steps) + 1) / (holding + 0.5))
            self._weights[(locale, term)] = cached
        return cached

    def text_of(self, lesson_id: str, step_id: str, locale: str) -> str:
        """The step's body (Markdown) in `locale`, English where it has no translation."""
        return self._bodies.get((locale, lesson_id, step_id), "")

    def steps_of(self, lesson_id: str, locale: str) -> list[StepHit]:
        """Every step of a lesson in order (no excerpt)."""
        with self._lock:
            found = self._db.execute(
                "SELECT step_id, position, title FROM steps "
                "WHERE lesson_id = ? AND locale = ? ORDER BY position",
                (lesson_id, locale),
            ).fetchall()
        return [StepHit(lesson_id, step, int(pos), title, "", 0.0) for step, pos, title in found]


def query_terms(query: str) -> list[str]:
    """The query's informative words (3+ letters, no common word of our languages), in order."""
    words = dict.fromkeys(_fold(word) for word in _TOKEN.findall(query))
    return [word for word in words if word not in _IGNORED][:MAX_QUERY_TOKENS]


def _match_expression(terms: list[str]) -> str | None:
    """Any of the terms as a prefix: 'epoch' also finds 'epoch'ta'.

    Every word is quoted, so FTS5 operators typed by the learner are only words.
    """
    if not terms:
        return None
    return " OR ".join(f'"{word}"*' for word in terms)


def _fold(word: str) -> str:
    """Lowered, without diacritics, as the FTS5 tokenizer compares ('ı' stays its own letter)."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


_IGNORED = frozenset(_fold(word) for word in _QUESTION_WORDS.union(*STOP_WORDS.values()))


def _words(text: str) -> list[str]:
    return [_fold(word) for word in re.findall(r"[^\W_]+", text, re.UNICODE)]


def _holds(words: frozenset[str], term: str) -> bool:
    """A word of the step starts with the term (or, for 'set_epoch', holds each of its parts)."""
    parts = [_stem(part) for part in term.split("_") if part]
    return all(any(word.startswith(part) for word in words) for part in parts)


def _stem(word: str) -> str:
    """A crude stem for every language: 'epocas' finds 'epoca', 'ağırlıkları' 'ağırlıklar'."""
    if len(word) > 3 and word.endswith("s"):  # plurals: 'ranks' finds 'rank'
        word = word[:-1]
    if len(word) > 6:
        return word[: max(5, len(word) - 3)]
    return word[: max(4, len(word) - 2)] if len(word) > 5 else word


def _relevant(in_title: float, in_step: float) -> bool:
    """More than half of the query's weight, or a good part of it with some in the title."""
    return in_step > MIN_COVERAGE or (in_title > 0 and in_step >= TITLE_COVERAGE)


GLOSSARY = REPO_ROOT / "docs" / "glossary.md"


def glossary_words(path: Path = GLOSSARY) -> frozenset[str]:
    """The course's own terms: each one-word term of the glossary's tables, in every language
    (`worker`, `torchrun`, `epoch`, `barrier`), folded; none if the file is missing."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    words = set()
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith("| en ") or line.startswith("|---"):
            continue
        for cell in line.strip("|").split("|")[:3]:
            for term in re.split(r"[,;()`/]", cell):
                parts = _words(term)
                if len(parts) == 1 and len(parts[0]) >= 4 and parts[0] not in _IGNORED:
                    words.add(parts[0])
    return frozenset(words)


_index = content.PerCatalog(StepIndex)


def get_index() -> StepIndex:
    """The index of the catalog the content service holds now (rebuilt after a reload)."""
    return _index.get()
