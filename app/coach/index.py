"""Retrieval over the lesson steps: an in-memory SQLite FTS5 index ranked by BM25, per locale.

The index is embedded (it works the same when the app's database is PostgreSQL) and is built from
the loaded lesson YAML: at start, and again whenever the content service reloads the catalog.
Each step is indexed once per locale, in that locale's text (English where it has no translation).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass

from app.content import service as content
from app.content.loader import Catalog
from app.i18n import SUPPORTED_LOCALES

# Title hits count five times a body hit; code snippets count like the body.
_WEIGHTS = "0, 0, 0, 0, 5.0, 1.0"
_TOKEN = re.compile(r"\w{3,}", re.UNICODE)
_MARKDOWN_NOISE = re.compile(r"[`*#>\[\]]+")
MAX_QUERY_TOKENS = 24


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

    def search(
        self, query: str, locale: str, *, lesson_id: str | None = None, limit: int = 3
    ) -> list[StepHit]:
        """The best steps for `query` in `locale` (optionally within one lesson), best first."""
        match = _match_expression(query)
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
        params.append(limit)
        with self._lock:
            found = self._db.execute(sql, params).fetchall()
        return [
            StepHit(lesson, step, int(position), title, " ".join(excerpt.split()), float(score))
            for lesson, step, position, title, excerpt, score in found
        ]

    def steps_of(self, lesson_id: str, locale: str) -> list[StepHit]:
        """Every step of a lesson in order (no excerpt)."""
        with self._lock:
            found = self._db.execute(
                "SELECT step_id, position, title FROM steps "
                "WHERE lesson_id = ? AND locale = ? ORDER BY position",
                (lesson_id, locale),
            ).fetchall()
        return [StepHit(lesson_id, step, int(pos), title, "", 0.0) for step, pos, title in found]


def _match_expression(query: str) -> str | None:
    """Any of the query's words (3+ letters) as a prefix: 'epoch' also finds 'epoch'ta'.

    Every word is quoted, so FTS5 operators typed by the learner are only words.
    """
    words = list(dict.fromkeys(word.lower() for word in _TOKEN.findall(query)))
    if not words:
        return None
    return " OR ".join(f'"{word}"*' for word in words[:MAX_QUERY_TOKENS])


_built: tuple[Catalog, StepIndex] | None = None
_build_lock = threading.Lock()


def get_index() -> StepIndex:
    """The index of the catalog the content service holds now (rebuilt after a reload)."""
    global _built
    catalog = content.get_catalog()
    built = _built
    if built is not None and built[0] is catalog:
        return built[1]
    with _build_lock:
        if _built is None or _built[0] is not catalog:
            _built = (catalog, StepIndex(catalog))
        return _built[1]
