"""The shipped quizzes cannot be passed by a pattern: the right answer is seldom the longest
choice, its rank by length (longest, middle, shortest) is spread in every language, no choice
refers to another one (choices are shuffled per learner), and the right answer sits at every
position of the choices, not mostly at one."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from app.config import REPO_ROOT
from app.content.loader import load_catalog
from app.content.schemas import QuizQuestion
from grader.i18n import LOCALES as SUPPORTED_LOCALES

LOCALES = SUPPORTED_LOCALES
MAX_LONGEST_SHARE = 0.40
# No rank by length (longest, middle, shortest) holds more than this share of the questions.
MAX_LENGTH_RANK_SHARE = 0.45
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


def length_rank(question: QuizQuestion, locale: str) -> str:
    """Where the right choice falls when the choices are sorted by length in `locale`:
    "longest", "shortest" (strictly, of all choices) or "middle"."""
    lengths = {
        choice.id: len(choice.text.get(locale) or choice.text.en) for choice in question.choices
    }
    right = lengths.pop(question.answer)
    if all(right > length for length in lengths.values()):
        return "longest"
    if all(right < length for length in lengths.values()):
        return "shortest"
    return "middle"


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


@pytest.mark.parametrize("locale", LOCALES)
def test_the_right_answers_rank_by_length_is_spread(locale: str) -> None:
    questions = _questions()
    ranks = Counter(length_rank(q, locale) for q in questions)
    worst, count = ranks.most_common(1)[0]
    listed = sorted(q.id for q in questions if length_rank(q, locale) == worst)
    assert count <= MAX_LENGTH_RANK_SHARE * len(questions), f"{worst}: {dict(ranks)} {listed}"


# How one choice points at another ("20: the same, plus ..."): with the choices shuffled per
# learner, the choice it points at may come after it, or not be where "above" says.
REFERRING = {
    "en": r"(^|: )(the same|same as|both)\b|\b(above|below|other choices?|(option|choice) [a-d])\b",
    "tr": r"(^|: )(aynısı|aynı şey)|yukarıdaki|aşağıdaki|diğer seçenek|[a-d] şıkkı",
    "pt-BR": r"(^|: )(o mesmo|a mesma)\b|\b(acima|abaixo|outra opção|alternativa [a-d])\b",
}


@pytest.mark.parametrize("locale", LOCALES)
def test_no_choice_refers_to_another(locale: str) -> None:
    pattern = re.compile(REFERRING[locale], re.IGNORECASE)
    referring = [
        f"{q.id}/{c.id}: {c.text.get(locale) or c.text.en}"
        for q in _questions()
        for c in q.choices
        if pattern.search(c.text.get(locale) or c.text.en)
    ]
    assert referring == []


def test_the_reference_check_would_catch_the_old_choice() -> None:
    """The ddp-memory choice the 2026-12-02 review found dangling, in each language."""
    old = {
        "en": "20: the same, plus DDP's bucket copy of the gradients",
        "tr": "20: aynısı, artı DDP'nin gradyanların bucket kopyası",
        "pt-BR": "20: o mesmo, mais a cópia dos gradientes nos buckets do DDP",
    }
    for locale, text in old.items():
        assert re.search(REFERRING[locale], text, re.IGNORECASE), locale


def test_length_rank_reads_the_locale() -> None:
    """The rank is measured in each language's own text, not the English one."""
    question = QuizQuestion.model_validate(
        {
            "id": "q",
            "question": "?",
            "choices": [
                {"id": "a", "text": {"en": "a long right answer", "tr": "kısa"}},
                {"id": "b", "text": {"en": "short", "tr": "uzun bir yanlış yanıt"}},
            ],
            "answer": "a",
            "explanation": "-",
        }
    )
    assert (length_rank(question, "en"), length_rank(question, "tr")) == ("longest", "shortest")


# Absolute words a learner can eliminate on sight: a choice that leads with "Nothing" or says
# "always"/"never". Each may appear, but not only in wrong choices.
ABSOLUTE_CUES = {
    "en": {"nothing": r"^(nothing|none)\b", "always": r"\balways\b", "never": r"\bnever\b"},
    "tr": {
        "nothing": r"^(hiçbir şey|hiçbiri)",
        "always": r"\bher zaman\b",
        "never": r"\b(asla|hiçbir zaman)\b",
    },
    "pt-BR": {"nothing": r"^(nada|nenhum)\b", "always": r"\bsempre\b", "never": r"\bnunca\b"},
}


def absolute_cues(questions: list[QuizQuestion], locale: str) -> dict[str, tuple[int, int]]:
    """For each absolute word: (choices that carry it and are right, those that are wrong)."""
    counts: dict[str, tuple[int, int]] = {}
    for cue, pattern in ABSOLUTE_CUES[locale].items():
        right = wrong = 0
        for q in questions:
            for c in q.choices:
                if re.search(pattern, c.text.get(locale) or c.text.en, re.IGNORECASE):
                    right, wrong = (right + 1, wrong) if c.id == q.answer else (right, wrong + 1)
        counts[cue] = (right, wrong)
    return counts


@pytest.mark.parametrize("locale", LOCALES)
def test_no_absolute_word_marks_only_wrong_choices(locale: str) -> None:
    counts = absolute_cues(_questions(), locale)
    always_wrong = {cue: n for cue, n in counts.items() if n[1] > 0 and n[0] == 0}
    assert always_wrong == {}, f"(right, wrong) per cue: {counts}"


def test_the_absolute_word_check_would_catch_the_old_choices() -> None:
    """The 2026-12-07 review's cues: every "Nothing: ..." choice and every "always" was wrong."""
    old = QuizQuestion.model_validate(
        {
            "id": "q",
            "question": "?",
            "choices": [
                {"id": "a", "text": {"en": "Nothing: SUM already returns the mean"}},
                {"id": "b", "text": {"en": "Yes: the average of means is always the mean"}},
                {"id": "c", "text": {"en": "Every step is 4 times the full-batch step"}},
            ],
            "answer": "c",
            "explanation": "-",
        }
    )
    assert absolute_cues([old], "en") == {"nothing": (0, 1), "always": (0, 1), "never": (0, 0)}


# Per lesson, the right answer is not the shortest (or the longest) choice in most questions.
MAX_LESSON_RANK_SHARE = 0.5


@pytest.mark.parametrize("locale", LOCALES)
def test_no_lesson_leans_on_one_length_rank(locale: str) -> None:
    catalog = load_catalog(REPO_ROOT / "lessons")
    for item in catalog.ordered:
        quiz = item.lesson.quiz
        for rank in ("shortest", "longest"):
            listed = [q.id for q in quiz if length_rank(q, locale) == rank]
            assert len(listed) <= MAX_LESSON_RANK_SHARE * len(quiz), (item.id, rank, listed)
