"""A lesson's concepts (what the coach answers when asked about an idea), checked: each names
steps of its lesson, has terms and an answer in every supported locale, and the answer is 2 to 5
sentences that explain (a line ending in a colon is an excerpt, not an answer).

A missing translation is a warning, as for hint levels (the coach shows English meanwhile);
`python -m app.content validate --strict` fails on it.
"""

from __future__ import annotations

import re

from app.content.hintcheck import Issue
from app.content.schemas import Concept
from grader.i18n import LOCALES

MIN_SENTENCES = 2
MAX_SENTENCES = 5
_SENTENCE_END = re.compile(r"(?<!\d)[.!?](?:[\"”’)`*]*)(?=\s|$)")  # "2. aşama" ends none
_CODE = re.compile(r"`[^`]*`")


def sentences(text: str) -> int:
    """Sentences in `text` (inline code left out: `a.b()` ends none)."""
    return len(_SENTENCE_END.findall(_CODE.sub("code", text.strip())))


def concept_issues(index: int, concept: Concept, step_ids: set[str]) -> list[Issue]:
    where = ("concepts", index)
    issues: list[Issue] = []
    for position, step in enumerate(concept.steps):
        if step not in step_ids:
            issues.append(
                Issue(
                    (*where, "steps", position),
                    f"{step!r} is not a step of this lesson: use one of its step ids",
                )
            )
    unknown = sorted(set(concept.terms) - set(LOCALES))
    if unknown:
        issues.append(
            Issue(
                (*where, "terms"),
                f"has terms in {', '.join(unknown)}, which is not a supported locale: use "
                f"{', '.join(LOCALES)}",
            )
        )
    for locale in LOCALES:
        if not [term for term in concept.terms.get(locale, []) if term.strip()]:
            issues.append(
                Issue((*where, "terms"), f"has no {locale} terms: add the words for it", True)
            )
        text = concept.answer.get(locale)
        if not text:
            issues.append(Issue((*where, "answer"), f"has no {locale} answer: translate it", True))
            continue
        count = sentences(text)
        if not MIN_SENTENCES <= count <= MAX_SENTENCES or text.rstrip().endswith(":"):
            issues.append(
                Issue(
                    (*where, "answer", locale),
                    f"is {count} sentence(s): write {MIN_SENTENCES} to {MAX_SENTENCES} that "
                    "explain the idea (not an excerpt ending with a colon)",
                )
            )
    return issues
