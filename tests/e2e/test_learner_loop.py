"""The verdict and the way on, in Chromium: the verdict banner scrolled into view and focused,
failed checks first then not judged, passes collapsed, "rank N, line L" moves the editor's cursor,
a pass offers what comes next in the lesson's sequence; the lesson is one sequence of cards in
the author's order (steps, questions and exercises interleaved, then the next lesson) that never
dead-ends and that the meter counts whole; Previous/Next keep the buttons in place on a phone;
keyboard tips only where there is a keyboard."""

from __future__ import annotations

import re
from typing import Any

from tests.e2e.conftest import LiveServer, sign_up
from tests.e2e.results import failed_result, passed_result

LESSON_URL = "/lessons/ddp-fundamentals"


def open_exercise(page: Any, slug: str = "train", lesson_url: str = LESSON_URL) -> Any:
    """The exercise's card with its editor, which only a signed-in learner gets."""
    if not page.context.cookies():
        sign_up(page)
    page.goto(f"{lesson_url}#exercise-{slug}")  # a link into a card shows that card
    section = page.locator(f'section.sub[data-exercise="{lesson_url.rsplit("/", 1)[1]}/{slug}"]')
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


def test_a_pass_offers_what_comes_next_in_the_sequence(page: Any) -> None:
    # Lesson 2's train exercise ends its core path: a pass goes on with the next card, a step.
    section = open_exercise(page)
    show(section, passed_result())
    offer = section.locator('[data-role="next"] a')
    assert offer.is_visible()
    assert offer.get_attribute("href") == "#step-unused-parameters"
    assert "Continue" in offer.inner_text()
    offer.click()
    page.locator("#step-unused-parameters").wait_for()  # that card is shown, on the same page
    assert page.locator("#exercise-train").is_hidden()
    # Lesson 3 keeps the old order: one exercise after another, then the next lesson.
    lesson_3 = "/lessons/syncbn-sharded-state"
    first = open_exercise(page, "syncbn", lesson_3)
    show(first, passed_result())
    offer = first.locator('[data-role="next"] a')
    assert offer.get_attribute("href") == "#exercise-zero-checkpoint"
    assert "Next exercise" in offer.inner_text()
    second = open_exercise(page, "zero-checkpoint", lesson_3)
    show(second, passed_result())
    offer = second.locator('[data-role="next"] a')
    assert offer.get_attribute("href") == "#exercise-zero-by-hand"  # lesson 3's exercise order
    last = open_exercise(page, "fsdp-reshard", lesson_3)
    show(last, passed_result())
    offer = last.locator('[data-role="next"] a')
    assert offer.is_visible()
    assert re.match(r"/lessons/[\w-]+$", offer.get_attribute("href") or "")
    assert "Next lesson" in offer.inner_text()


def kinds(page: Any) -> list[str]:
    """Each card's kind, in the page's order."""
    return list(
        page.locator(".step-card").evaluate_all(
            "cards => cards.map(c => c.dataset.stepId ? 'step'"
            " : c.dataset.questionId ? 'question' : 'exercise')"
        )
    )


def meter_value(page: Any) -> int:
    return int(page.locator(".step-meter").evaluate("m => m.value"))


def test_the_sequence_interleaves_steps_questions_and_exercises(page: Any) -> None:
    page.goto(LESSON_URL)
    order = kinds(page)
    parts = len(order)
    assert {"step", "question", "exercise"} <= set(order)
    assert order[-1] == "step"  # lesson 2 ends with a step: exercises sit in the middle
    meter = page.locator(".step-meter")
    assert int(meter.get_attribute("max") or 0) == parts
    assert page.locator("#step-status").inner_text() == f"Step 1 of {parts}"

    # From the card before the first exercise, Next opens the exercise in its own card.
    exercise = order.index("exercise") + 1
    page.goto(f"{LESSON_URL}?step={exercise - 1}")
    page.locator('[data-step-nav="next"]').click()
    card = page.locator(".step-card--exercise").first
    assert card.is_visible() and page.locator(".step-card[data-step-id]:visible").count() == 0
    assert page.locator("#step-status").inner_text() == f"Step {exercise} of {parts}"
    assert meter_value(page) == exercise
    assert re.search(rf"step={exercise}", page.url)
    # The keyboard moves through the same sequence (focus is on the exercise's heading).
    page.keyboard.press("ArrowLeft")
    assert page.locator("#step-status").inner_text() == f"Step {exercise - 1} of {parts}"
    page.keyboard.press("ArrowRight")
    assert card.is_visible()
    page.keyboard.press("ArrowRight")  # and on past the exercise, into the next card
    assert page.locator("#step-status").inner_text() == f"Step {exercise + 1} of {parts}"

    # The last card does not dead-end: Next gives way to the next lesson.
    page.goto(f"{LESSON_URL}?step={parts}")
    after = page.locator('[data-step-nav="after"]')
    assert after.is_visible() and page.locator('[data-step-nav="next"]').is_hidden()
    assert re.match(r"/lessons/[\w-]+$", after.get_attribute("href") or "")
    page.locator('[data-step-nav="prev"]').click()
    assert after.is_hidden() and page.locator('[data-step-nav="next"]').is_visible()


def test_a_link_to_a_question_opens_its_card(page: Any) -> None:
    page.goto(LESSON_URL)
    question = page.locator(".step-card--quiz").last
    question_id = question.get_attribute("data-question-id")
    position = int(question.get_attribute("data-step-index") or 0)
    page.goto(f"{LESSON_URL}#quiz-{question_id}")  # as the course page's Continue links
    question.wait_for()
    assert meter_value(page) == position
    page.goto(f"{LESSON_URL}?question={question_id}")  # the same without JavaScript
    assert page.get_attribute("#steps", "data-current") == str(position)


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
        for index in range(2, cards + 1):  # every card: steps, questions and exercises
            next_link.click()
            assert page.locator("#step-status").inner_text().startswith(f"Step {index} ")
            # The card may be shorter or longer; the page never jumps to the top, so the
            # buttons stay within reach of the thumb, and the new card's title is in view.
            button = page.locator(
                '[data-step-nav="next"]:visible, [data-step-nav="after"]:visible'
            ).bounding_box()
            title = page.locator(
                ".step-card:not([hidden]) :is(.step-card__title, h3)"
            ).first.bounding_box()
            assert button is not None and title is not None
            assert button["y"] >= 0 and button["y"] + button["height"] <= 844, index
            assert 0 <= title["y"] <= 844, index
    finally:
        context.close()


def test_with_a_keyboard_the_tips_show(page: Any) -> None:
    page.goto(LESSON_URL)
    assert page.locator(".steps .keyboard-only").is_visible()
