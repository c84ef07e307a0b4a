"""The figures the course states about itself follow from the course: each lesson's
`duration_minutes` from the README's rule (about 120 words a minute of reading, about 15 minutes
per exercise), and the FAQ's range of lesson durations from those. A lesson that grows (a new step,
a new exercise) fails here until its stated duration is updated."""

from __future__ import annotations

import re

import pytest

from app.config import REPO_ROOT
from app.content.loader import load_catalog
from app.content.schemas import Lesson
from grader.i18n import LOCALES

WORDS_PER_MINUTE = 120
MINUTES_PER_EXERCISE = 15
TOLERANCE = 0.10


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def estimated_minutes(lesson: Lesson) -> float:
    """The rule the FAQ states, on the English text: step titles, bodies and code; quiz
    questions, choices and explanations; exercise prompts."""
    words = sum(_words(s.title.en) + _words(s.body.en) + _words(s.code) for s in lesson.steps)
    for q in lesson.quiz:
        words += _words(q.question.en) + _words(q.explanation.en)
        words += sum(_words(c.text.en) for c in q.choices)
    words += sum(_words(e.prompt.en) for e in lesson.exercises)
    return words / WORDS_PER_MINUTE + MINUTES_PER_EXERCISE * len(lesson.exercises)


def _lessons() -> list[Lesson]:
    return [item.lesson for item in load_catalog(REPO_ROOT / "lessons").ordered]


@pytest.mark.parametrize("lesson", _lessons(), ids=lambda lesson: lesson.id)
def test_a_lessons_stated_duration_follows_the_rule(lesson: Lesson) -> None:
    estimate = estimated_minutes(lesson)
    assert abs(lesson.duration_minutes - estimate) <= TOLERANCE * estimate, (
        f"{lesson.id}: states {lesson.duration_minutes} min, the rule gives {estimate:.0f}"
    )


# "From 60 to 85 minutes" in each language: the FAQ's range of lesson durations.
RANGE = {
    "en": r"From (\d+) to (\d+) minutes",
    "tr": r"(\d+) ile (\d+) dakika arası",
    "pt-BR": r"De (\d+) a (\d+) minutos",
}


@pytest.mark.parametrize("locale", LOCALES)
def test_the_faqs_duration_range_is_the_lessons(locale: str) -> None:
    course = load_catalog(REPO_ROOT / "lessons").course
    entry = next(e for e in course.faq if e.id == "how-long-is-a-lesson")
    found = re.search(RANGE[locale], entry.answer.get(locale) or "")
    assert found, entry.answer.get(locale)
    low, high = int(found[1]), int(found[2])
    estimates = [estimated_minutes(lesson) for lesson in _lessons()]
    assert abs(low - min(estimates)) <= TOLERANCE * min(estimates), (low, estimates)
    assert abs(high - max(estimates)) <= TOLERANCE * max(estimates), (high, estimates)


def test_the_faq_states_no_per_lesson_counts() -> None:
    """Card, question and exercise counts went stale twice in the FAQ: the course page shows each
    lesson's figures, so the FAQ states none."""
    course = load_catalog(REPO_ROOT / "lessons").course
    answers = " ".join(e.answer.en for e in course.faq)
    assert not re.search(r"\d+ (step cards|cards|questions|exercises)\b", answers), answers


def test_the_rule_counts_an_exercise_as_fifteen_minutes() -> None:
    lesson = Lesson.model_validate(
        {
            "id": "tiny",
            "title": {"en": "Tiny"},
            "summary": {"en": "-"},
            "duration_minutes": 1,
            "steps": [{"id": "one", "title": {"en": "a b"}, "body": {"en": " ".join(["w"] * 118)}}],
        }
    )
    assert estimated_minutes(lesson) == 1.0
