"""The verdict and the way on, in Chromium: the verdict banner scrolled into view and focused,
failed checks first then not judged, passes collapsed, "rank N, line L" moves the editor's cursor,
a pass offers the next step; the lesson is one sequence (steps, the quick check's cards, the
exercise, the next lesson) that never dead-ends and that the meter counts whole; Previous/Next
keep the buttons in place on a phone; keyboard tips only where there is a keyboard."""

from __future__ import annotations

import re
from typing import Any

from tests.e2e.conftest import LiveServer, sign_up
from tests.e2e.results import failed_result, passed_result

LESSON_URL = "/lessons/ddp-fundamentals"
SECTION = 'section.sub[data-exercise="ddp-fundamentals/train"]'


def open_exercise(page: Any, selector: str = SECTION) -> Any:
    """The exercise with its editor, which only a signed-in learner gets."""
    if not page.context.cookies():
        sign_up(page)
    page.goto(LESSON_URL)
    section = page.locator(selector)
    section.locator(".cm-content").wait_for()
    return section


def show(section: Any, result: dict[str, Any]) -> None:
    section.evaluate("(s, r) => s.rdvExercise.showResult('done', r, true)", result)


def test_failed_result_focuses_the_verdict_failed_first_passes_collapsed(page: Any) -> None:
    section = open_exercise(page)
    result = failed_result()
    show(section, result)
    summary = section.locator('[data-role="summary"]')
    assert page.evaluate("document.activeElement.dataset.role") == "summary"
    box = summary.bounding_box()
    assert box is not None and 0 <= box["y"] < 800  # on screen, not 600 px above it
    statuses = section.locator('[data-role="checks"] .sub__check').evaluate_all(
        "els => els.map(e => e.dataset.status)"
    )
    assert statuses == sorted(statuses, key=["fail", "skip"].index)  # failed, then not judged
    assert "pass" not in statuses
    passes = [c for c in result["checks"] if c["status"] == "pass"]
    passed = section.locator('[data-role="passed"]')
    if passes:
        assert passed.is_visible() and passed.get_attribute("open") is None
        assert f"({len(passes)})" in passed.locator("summary").inner_text()
    assert section.locator('[data-role="next"]').is_hidden()  # no "next" on a failure
    skipped = section.locator('.sub__check[data-status="skip"] .sub__badge')
    if skipped.count():
        assert skipped.first.inner_text().lower() == "not judged"


def test_rank_and_line_move_the_editor_cursor(page: Any) -> None:
    section = open_exercise(page)
    show(section, failed_result())
    section.locator('.sub__check[data-check="ckpt.barrier"] button.sub__line').click()
    line = section.evaluate(
        "s => { const v = s.rdvExercise.editor.view;"
        " return v.state.doc.lineAt(v.state.selection.main.head).number; }"
    )
    assert line == 12
    assert page.evaluate("document.activeElement.classList.contains('cm-content')")


def test_a_pass_offers_the_next_exercise_then_the_next_lesson(page: Any) -> None:
    section = open_exercise(page)
    show(section, passed_result())
    offer = section.locator('[data-role="next"] a')
    assert offer.is_visible()
    assert offer.get_attribute("href") == "#exercise-accumulate"
    assert "Next exercise" in offer.inner_text()
    last = open_exercise(page, 'section.sub[data-exercise="ddp-fundamentals/evaluate"]')
    show(last, passed_result())
    offer = last.locator('[data-role="next"] a')
    assert offer.is_visible()
    assert re.match(r"/lessons/[\w-]+$", offer.get_attribute("href") or "")
    assert "Next lesson" in offer.inner_text()


def counts(page: Any) -> tuple[int, int, int]:
    steps = page.locator(".step-card[data-step-id]").count()
    return steps, page.locator(".step-card--quiz").count(), page.locator(".exercise").count()


def meter_value(page: Any) -> int:
    return int(page.locator(".step-meter").evaluate("m => m.value"))


def test_the_steps_lead_on_to_the_quick_check_cards_then_the_exercise(page: Any) -> None:
    page.goto(LESSON_URL)
    steps, questions, exercises = counts(page)
    assert questions > 0 and exercises > 0
    parts = steps + questions + exercises
    meter = page.locator(".step-meter")
    assert int(meter.get_attribute("max") or 0) == parts
    assert page.locator("#step-status").inner_text() == f"Step 1 of {parts}"

    page.goto(f"{LESSON_URL}?step={steps}")
    page.locator('[data-step-nav="next"]').click()  # from the last step into the quick check
    first_quiz = page.locator(".step-card--quiz").first
    assert first_quiz.is_visible() and page.locator(".step-card[data-step-id]:visible").count() == 0
    assert page.locator("#step-status").inner_text() == f"Step {steps + 1} of {parts}"
    assert meter_value(page) == steps + 1
    assert re.search(rf"step={steps + 1}", page.url)
    # The keyboard moves through the same sequence (focus is on the card's title).
    page.keyboard.press("ArrowLeft")
    assert page.locator("#step-status").inner_text() == f"Step {steps} of {parts}"
    page.keyboard.press("ArrowRight")
    assert first_quiz.is_visible()

    for _ in range(questions - 1):
        page.locator('[data-step-nav="next"]').click()
    after = page.locator('[data-step-nav="after"]')
    assert after.is_visible() and page.locator('[data-step-nav="next"]').is_hidden()
    assert page.locator(".step-card--quiz").last.is_visible()
    assert meter_value(page) == steps + questions
    after.click()  # on to the exercise
    page.wait_for_url(re.compile(r"#exercises$"))
    page.wait_for_function(
        "v => document.querySelector('.step-meter').value === v", arg=steps + questions + 1
    )
    assert page.locator("#step-status").inner_text() == f"Step {steps + questions + 1} of {parts}"
    # ... and after the exercises, the next lesson.
    assert page.locator("#exercises [data-next-lesson]").is_visible()

    page.locator('[data-step-nav="prev"]').click()
    assert after.is_hidden() and page.locator('[data-step-nav="next"]').is_visible()


def test_a_link_to_a_question_opens_its_card(page: Any) -> None:
    page.goto(LESSON_URL)
    steps, questions, _ = counts(page)
    question = page.locator(".step-card--quiz").nth(questions - 1)
    question_id = question.get_attribute("data-question-id")
    page.goto(f"{LESSON_URL}#quiz-{question_id}")  # as the course page's Continue links
    question.wait_for()
    assert meter_value(page) == steps + questions
    page.goto(f"{LESSON_URL}?question={question_id}")  # the same without JavaScript
    assert page.get_attribute("#steps", "data-current") == str(steps + questions)


def test_on_a_phone_next_stays_put_and_no_keyboard_tips(
    browser: Any, live_server: LiveServer
) -> None:
    context = browser.new_context(
        base_url=live_server.url,
        viewport={"width": 390, "height": 844},
        is_mobile=True,
        has_touch=True,
    )
    try:
        page = context.new_page()
        page.goto(LESSON_URL)
        header = page.locator(".site-header").bounding_box()
        assert header is not None and header["height"] <= 64
        assert page.locator(".keyboard-only").evaluate_all(
            "els => els.every(e => getComputedStyle(e).display === 'none')"
        )
        next_link = page.locator('[data-step-nav="next"]')
        next_link.scroll_into_view_if_needed()
        cards = page.locator(".step-card").count()
        for index in range(2, cards + 1):  # the steps, then the quick check's cards
            next_link.click()
            assert page.locator("#step-status").inner_text().startswith(f"Step {index} ")
            # The card may be shorter or longer; the page never jumps to the top, so the
            # buttons stay within reach of the thumb, and the new card's title is in view.
            button = page.locator(
                '[data-step-nav="next"]:visible, [data-step-nav="after"]:visible'
            ).bounding_box()
            title = page.locator(".step-card:not([hidden]) .step-card__title").bounding_box()
            assert button is not None and title is not None
            assert button["y"] >= 0 and button["y"] + button["height"] <= 844, index
            assert 0 <= title["y"] <= 844, index
    finally:
        context.close()


def test_with_a_keyboard_the_tips_show(page: Any) -> None:
    page.goto(LESSON_URL)
    assert page.locator(".steps .keyboard-only").is_visible()
