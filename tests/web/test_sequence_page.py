"""The lesson page and the API follow a lesson's `sequence`: cards in the author's order, "Step N
of M" over all of them, `?question=` and the index pointing at the right card, and an exercise in
the middle offering to go on with the lesson after a pass."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.auth.factories import browser_sign_up
from tests.content.test_sequence import interleave

ORDER = ["step-one", "quiz-card-count", "step-two", "exercise-hello", "step-three"]


@pytest.fixture(autouse=True)
def _interleaved(use_lessons: Callable[[Path], None], lessons_copy: Path) -> None:
    interleave(lessons_copy)
    use_lessons(lessons_copy)


def card_order(html: str) -> list[str]:
    return re.findall(r'<section class="step-card[^"]*"\s+id="([^"]+)"', html)


def test_the_cards_come_in_the_sequence(client: TestClient) -> None:
    browser_sign_up(client)  # a signed-in learner gets the exercise's editor and its result box
    page = client.get("/lessons/second-lesson?step=4").text
    assert card_order(page) == ORDER
    for index, card_id in enumerate(ORDER, 1):
        assert re.search(rf'id="{card_id}"[^>]*data-step-index="{index}"', page), card_id
    # The fourth card, the exercise, is the one shown; the others are hidden.
    assert "Step 4 of 5" in page
    assert not re.search(r'id="exercise-hello"[^>]*\bhidden>', page)
    assert re.search(r'id="step-two"[^>]*\bhidden>', page)
    # After a pass the exercise offers the card that follows it, not the next lesson.
    assert re.search(r'href="#step-three">\s*Continue', page)
    # The index lists every card once, in order: the question and the exercise in their place.
    listed = re.search(r'<ol class="step-index".*?</ol>', page, re.S)
    assert listed is not None
    links = re.findall(r'data-step-link="(\d+)"[^>]*>\s*([^<]+?)\s*</a>', listed.group(0))
    assert links == [
        ("1", "One"),
        ("2", "Quick check"),
        ("3", "Two"),
        ("4", "Exercise: Say hello from every rank"),
        ("5", "Three"),
    ]


def test_a_question_link_opens_its_card_in_the_sequence(client: TestClient) -> None:
    page = client.get("/lessons/second-lesson", params={"question": "count"}).text
    assert 'data-current="2"' in page
    assert 'action="/lessons/second-lesson/quiz/count?step=2#quiz-count"' in page


def test_the_api_serves_the_sequence(client: TestClient) -> None:
    body = client.get("/api/v1/lessons/second-lesson").json()
    assert [(card["kind"], card["id"]) for card in body["sequence"]] == [
        ("step", "one"),
        ("question", "count"),
        ("step", "two"),
        ("exercise", "hello"),
        ("step", "three"),
    ]
