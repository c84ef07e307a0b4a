"""In Chromium with JavaScript off: a signed-in learner answers a quick-check question through the
plain form, sees the verdict at the same step, and then sees that progress on the course page
(and a Continue link instead of Start)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from app.config import REPO_ROOT
from app.content.loader import load_catalog
from app.content.service import localized_lesson
from tests.e2e.accounts import register, sign_in_after_registering
from tests.e2e.conftest import LiveServer

CATALOG = load_catalog(REPO_ROOT / "lessons")
LESSON = next((item.lesson for item in CATALOG.ordered if item.lesson.quiz), None)
pytestmark = pytest.mark.skipif(LESSON is None, reason="no lesson with a quick check loads")


def card(page: Any, lesson_id: str) -> Any:
    return page.locator(".lesson-card").filter(
        has=page.locator(f'h3 a[href="/lessons/{lesson_id}"]')
    )


def test_a_no_js_answer_shows_up_on_the_course_page(browser: Any, live_server: LiveServer) -> None:
    assert LESSON is not None
    question = LESSON.quiz[0]
    total = len(LESSON.quiz)
    questions = "question" if total == 1 else "questions"
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    context.set_default_timeout(20_000)
    try:
        page = context.new_page()
        email, password = f"nojs-{uuid.uuid4().hex[:8]}@example.org", "correct horse battery"
        register(page, name="No Script", email=email, password=password)
        sign_in_after_registering(page, email=email, password=password)
        page.wait_for_url(f"{live_server.url}/?welcome=1")  # a new account is welcomed once
        assert "No Script" in page.locator(".notice--welcome").inner_text()

        before = card(page, LESSON.id)
        assert before.locator("[data-action]").get_attribute("data-action") == "start"
        progress = before.locator('[data-testid="lesson-progress"]').inner_text()
        assert f"0 of {total} {questions} answered correctly" in progress

        before.locator('[data-action="start"]').click()
        page.wait_for_url(re.compile(rf"/lessons/{LESSON.id}"))
        # The question's card, wherever the lesson's sequence puts it (1-based, as ?step= counts).
        cards = [(card.kind, card.id) for card in localized_lesson(LESSON.id, "en").sequence]
        first_card = cards.index(("question", question.id)) + 1
        page.goto(f"/lessons/{LESSON.id}?step={first_card}")
        form = page.locator(f"#quiz-{question.id}")
        form.locator(f'input[value="{question.answer}"]').check()
        form.get_by_role("button", name="Check answer").click()
        page.wait_for_url(re.compile(rf"question={question.id}"))
        verdict = page.locator(f"#quiz-{question.id} .verdict")
        assert "Correct." in verdict.inner_text()
        assert page.get_attribute("#steps", "data-current") == str(first_card)  # its own card

        page.goto("/")
        after = card(page, LESSON.id)
        progress = after.locator('[data-testid="lesson-progress"]').inner_text()
        assert f"1 of {total} {questions} answered correctly" in progress
        assert "In progress" in progress
        action = after.locator("[data-action]")
        assert action.get_attribute("data-action") == "continue"
        assert action.get_attribute("href") == f"/lessons/{LESSON.id}?step=1#steps"
    finally:
        context.close()
