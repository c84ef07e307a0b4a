"""The course in a real browser: open the course, open lesson 2, move through its sequence (its
steps, quick-check questions and exercises, one card each, in the order its YAML sets) with the
buttons and the keyboard (and without JavaScript), answer a question in place, switch the
language, and read it all on a 360 px wide phone without sideways scrolling."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.config import REPO_ROOT
from app.content.loader import load_catalog
from tests.e2e.conftest import LiveServer

CATALOG = load_catalog(REPO_ROOT / "lessons")
LESSON_2 = next((item for item in CATALOG.ordered if item.number == 2), None)
pytestmark = pytest.mark.skipif(LESSON_2 is None, reason="lessons/02-*/lesson.yaml is not valid")


def lesson_two() -> Any:
    assert LESSON_2 is not None
    return LESSON_2.lesson


def parts(lesson: Any) -> int:
    """What "Step N of M" counts: every card, steps, questions and exercises."""
    return len(lesson.cards())


def card_of(lesson: Any, kind: str, item_id: str) -> int:
    """The 1-based position of a step, question or exercise in the lesson's sequence."""
    return int(lesson.cards().index((kind, item_id))) + 1


def questions_in_order(lesson: Any) -> list[Any]:
    by_id = {question.id: question for question in lesson.quiz}
    return [by_id[item_id] for kind, item_id in lesson.cards() if kind == "question"]


def status(page: Any) -> str:
    return str(page.locator("#step-status").inner_text()).strip()


def visible_step_ids(page: Any) -> list[str]:
    return list(
        page.eval_on_selector_all(
            ".step-card[data-step-id]",
            "cards => cards.filter(c => !c.hidden).map(c => c.dataset.stepId)",
        )
    )


def no_horizontal_overflow(page: Any) -> bool:
    return bool(
        page.evaluate(
            "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
    )


def test_course_page_lists_the_lessons_in_order(page: Any) -> None:
    page.goto("/")
    assert page.locator("h1").inner_text() == CATALOG.course.title.en
    links = page.locator(".lesson-card h3 a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert hrefs == [f"/lessons/{item.id}" for item in CATALOG.ordered]
    assert page.locator(".faq details").count() == len(CATALOG.course.faq)


def test_steps_with_buttons_and_keyboard(page: Any) -> None:
    lesson = lesson_two()
    total = parts(lesson)
    ids = [step.id for step in lesson.steps]
    page.goto("/")
    page.get_by_role("link", name=lesson.title.en, exact=True).first.click()
    page.wait_for_url(re.compile(rf"/lessons/{lesson.id}$"))
    assert status(page) == f"Step 1 of {total}"
    assert visible_step_ids(page) == [ids[0]]

    page.locator('[data-step-nav="next"]').click()
    assert status(page) == f"Step 2 of {total}"
    assert visible_step_ids(page) == [ids[1]]
    assert "step=2" in page.url
    assert page.evaluate("document.activeElement.id") == f"step-title-{ids[1]}"

    page.locator('[data-step-nav="prev"]').click()
    assert status(page) == f"Step 1 of {total}"
    assert visible_step_ids(page) == [ids[0]]

    page.keyboard.press("ArrowLeft")  # already at the first step: stays
    assert status(page) == f"Step 1 of {total}"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert status(page) == f"Step 3 of {total}"
    assert visible_step_ids(page) == [ids[2]]
    page.keyboard.press("ArrowLeft")
    assert visible_step_ids(page) == [ids[1]]

    page.reload()  # the URL keeps the position
    assert status(page) == f"Step 2 of {total}"
    assert visible_step_ids(page) == [ids[1]]


def visible_question_ids(page: Any) -> list[str]:
    return list(
        page.eval_on_selector_all(
            ".step-card--quiz",
            "cards => cards.filter(c => !c.hidden).map(c => c.dataset.questionId)",
        )
    )


def test_steps_and_quiz_cards_work_without_javascript(browser: Any, live_server: LiveServer):
    lesson = lesson_two()
    cards = lesson.cards()
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"/lessons/{lesson.id}")
        page.locator('[data-step-nav="next"]').click()
        page.wait_for_url(re.compile(r"step=2"))
        assert status(page) == f"Step 2 of {parts(lesson)}"
        assert visible_step_ids(page) == [cards[1][1]]
        # The card before the first question leads to it: a card of its own, in the sequence.
        first = questions_in_order(lesson)[0]
        position = card_of(lesson, "question", first.id)
        page.goto(f"/lessons/{lesson.id}?step={position - 1}")
        page.locator('[data-step-nav="next"]').click()
        page.wait_for_url(re.compile(rf"step={position}"))
        assert status(page) == f"Step {position} of {parts(lesson)}"
        assert visible_step_ids(page) == []
        assert visible_question_ids(page) == [first.id]
    finally:
        context.close()


def test_each_question_is_a_card_answered_in_place(page: Any) -> None:
    lesson = lesson_two()
    questions = questions_in_order(lesson)
    for number, question in enumerate(questions, start=1):
        position = card_of(lesson, "question", question.id)
        page.goto(f"/lessons/{lesson.id}?step={position - 1}")
        page.locator('[data-step-nav="next"]').click()  # into the question's card
        assert visible_question_ids(page) == [question.id]
        assert status(page) == f"Step {position} of {parts(lesson)}"
        title = page.locator(f"#quiz-title-{question.id}")
        assert title.inner_text() == f"Quick check: question {number} of {len(questions)}"
        assert page.evaluate("document.activeElement.id") == f"quiz-title-{question.id}"
        page.evaluate("window.rdvSamePage = true")
        form = page.locator(f"#quiz-{question.id}")
        form.locator(f'input[value="{question.answer}"]').check()
        form.get_by_role("button", name="Check answer").click()
        verdict = form.locator(".verdict")
        verdict.wait_for()
        assert page.evaluate("window.rdvSamePage === true")  # answered in place, no page load
        assert "Correct." in verdict.inner_text()
        explanation = verdict.locator(".prose")
        assert "`" not in explanation.inner_text()  # Markdown rendered, like the step bodies
        assert explanation.inner_text().strip()


def test_switch_language(page: Any) -> None:
    lesson = lesson_two()
    page.goto(f"/lessons/{lesson.id}")
    page.locator(".locale-chooser").get_by_role("link", name="Türkçe").click()
    page.wait_for_function("document.documentElement.lang === 'tr'")
    assert page.locator("#lesson-title").inner_text() == (lesson.title.get("tr") or lesson.title.en)
    assert status(page) == f"Adım 1 / {parts(lesson)}"
    cookies = {cookie["name"]: cookie["value"] for cookie in page.context.cookies()}
    assert cookies["rdv_locale"] == "tr"
    page.goto("/")  # the choice sticks
    assert page.evaluate("document.documentElement.lang") == "tr"
    page.locator(".locale-chooser").get_by_role("link", name="Português (Brasil)").click()
    page.wait_for_function("document.documentElement.lang === 'pt-BR'")
    title = CATALOG.course.title
    assert page.locator("h1").inner_text() == (title.get("pt-BR") or title.en)


def test_readable_at_360_px_without_sideways_scrolling(browser: Any, live_server: LiveServer):
    lesson = lesson_two()
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 360, "height": 740}, is_mobile=True
    )
    try:
        page = context.new_page()
        page.goto("/")
        assert no_horizontal_overflow(page)
        page.goto(f"/lessons/{lesson.id}")
        cards = parts(lesson)
        for index in range(1, cards + 1):  # every card, the exercises' included
            assert status(page) == f"Step {index} of {parts(lesson)}"
            assert no_horizontal_overflow(page), f"card {index} is wider than the screen"
            if index < cards:
                page.locator('[data-step-nav="next"]').click()
        # At the last card Next gives way to what follows the cards (the next lesson).
        next_box = page.locator('[data-step-nav="after"]').bounding_box()
        assert next_box is not None and next_box["x"] + next_box["width"] <= 360
    finally:
        context.close()
