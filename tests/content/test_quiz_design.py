"""The shipped quizzes cannot be passed by a pattern: the right answer is seldom the longest
choice, and it sits at every position of the choices, not mostly at one."""

from __future__ import annotations

from collections import Counter

import pytest

from app.config import REPO_ROOT
from app.content.loader import load_catalog
from app.content.schemas import QuizQuestion

LOCALES = ("en", "tr", "pt-BR")
MAX_LONGEST_SHARE = 0.40
MIN_QUESTIONS_PER_LESSON = 5


def _questions() -> list[QuizQuestion]:
    catalog = load_catalog(REPO_ROOT / "lessons")
    return [question for item in catalog.ordered for question in item.lesson.quiz]


def _right_is_longest(question: QuizQuestion, locale: str) -> bool:
    lengths = {
        choice.id: len(choice.text.get(locale) or choice.text.en) for choice in question.choices
    }
    right = lengths[question.answer]
    return all(right > length for cid, length in lengths.items() if cid != question.answer)


def test_every_lesson_has_enough_questions() -> None:
    catalog = load_catalog(REPO_ROOT / "lessons")
    for item in catalog.ordered:
        assert len(item.lesson.quiz) >= MIN_QUESTIONS_PER_LESSON, item.id


@pytest.mark.parametrize("locale", LOCALES)
def test_the_right_answer_is_seldom_the_longest(locale: str) -> None:
    questions = _questions()
    longest = [q.id for q in questions if _right_is_longest(q, locale)]
    share = len(longest) / len(questions)
    assert share <= MAX_LONGEST_SHARE, f"{share:.0%} of the questions: {longest}"


def test_the_right_answer_sits_at_every_position() -> None:
    questions = _questions()
    positions = Counter([c.id for c in q.choices].index(q.answer) for q in questions)
    assert set(positions) >= {0, 1, 2}, positions
    assert max(positions.values()) <= 0.4 * len(questions), positions
