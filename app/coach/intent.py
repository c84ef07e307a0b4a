"""What kind of question the learner asked, in en, tr or pt-BR, before anything is looked up.

- "give_answer": they want the solution written for them ("just give me the answer");
- "still_stuck": they asked before and are still stuck ("Hâlâ anlamadım", "still don't get it");
- "run_line": what a line or a message of their run means ("hangi satırda?", "line 78");
- "hint": a hint, not the whole explanation ("me dá uma dica");
- "faster": how the program could be faster, or how to measure it;
- "why_failed": why their submission failed;
- "concept": what something is or does ("what is a DistributedSampler for?");
- "other": none of these cues; retrieval decides between a concept and off-topic.

The page's buttons never come here: they send their intent (`CoachQuestion.intent`). Free text is
matched with the lexicons of app/coach/lexicons.py on the folded question: the language it is
written in first, then the others; the first kind that matches, in lexicons.ORDER, wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.coach.language import detect, fold
from app.coach.lexicons import LEXICONS, NOT_THE_ANSWER, ORDER, WHY, Kind

# The result page's buttons: what each one asks, sent as `intent` (no text to classify).
BUTTON_INTENTS: dict[str, Kind] = {
    "why_failed": "why_failed",
    "hint": "hint",
    "still_stuck": "still_stuck",
}
# Kinds that ask about a failed check: they move its level on (app/coach/levels.py).
ABOUT_A_CHECK: frozenset[Kind] = frozenset({"why_failed", "hint", "still_stuck", "give_answer"})


@dataclass(frozen=True)
class Intent:
    kind: Kind
    rank: int | None = None  # "rank 1 line 78"
    line: int | None = None
    from_button: bool = False


_RANK = re.compile(r"\brank\s*(\d+)|(\d+)\.?\s*rank")
_LINE = re.compile(r"\b(?:line|linha|satir)\s*#?(\d+)|(\d+)\.?\s*satir|\bna (\d+)\b")


def kind_of(question: str, language: str | None = None) -> Kind:
    """The kind of `question`: its language's lexicon first (detected when not given)."""
    folded = fold(question)
    written_in = language or detect(question)
    languages = sorted(LEXICONS, key=lambda locale: locale != written_in)
    for locale in languages:
        lexicon = LEXICONS[locale]
        for kind in ORDER:
            if not lexicon[kind].search(folded):
                continue
            if kind == "give_answer" and NOT_THE_ANSWER[locale].search(folded):
                return "hint"
            asks_why = WHY[locale].search(folded) and lexicon["why_failed"].search(folded)
            if kind == "hint" and asks_why:
                return "why_failed"
            return kind
    return "other"


def classify(question: str, language: str | None = None) -> Intent:
    folded = fold(question)
    return Intent(kind_of(question, language), _number(_RANK, folded), _number(_LINE, folded))


def from_button(intent: str) -> Intent:
    return Intent(BUTTON_INTENTS[intent], from_button=True)


def _number(pattern: re.Pattern[str], text: str) -> int | None:
    found = pattern.search(text)
    if found is None:
        return None
    return int(next(group for group in found.groups() if group is not None))
