"""On a phone, in Chromium: "Back to my code" after the coach answers about a run, a skip link
from the top of a lesson to its exercise, code blocks that scroll sideways reachable by keyboard,
step links of at least 24 px, and a 404 page written for a learner."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import LiveServer
from tests.e2e.test_coach import sign_up, store_graded_run

LESSON_URL = "/lessons/ddp-fundamentals"
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


@pytest.fixture
def phone(browser: Any, live_server: LiveServer) -> Iterator[Any]:
    context = browser.new_context(base_url=live_server.url, **PHONE)
    context.set_default_timeout(20_000)
    yield context.new_page()
    context.close()


def in_view(page: Any, locator: Any) -> bool:
    box = locator.bounding_box()
    return box is not None and box["y"] + box["height"] > 0 and box["y"] < 844


def test_after_the_coach_answers_the_way_back_to_the_code_is_one_tap(
    browser: Any, live_server: LiveServer
) -> None:
    page, email = sign_up(browser, live_server, **PHONE)
    store_graded_run(live_server, email, "bug_no_set_epoch")
    page.goto(f"{LESSON_URL}#exercise-train")  # the exercise's card
    section = page.locator('section.sub[data-exercise="ddp-fundamentals/train"]')
    failed = section.locator('.sub__check[data-check="sampler.set_epoch"]')
    failed.get_by_role("button", name="Why did this fail?").click()
    back = page.locator("#coach").get_by_role("button", name="Back to my code")
    back.wait_for()
    editor = section.locator(".cm-content")
    assert not in_view(page, editor)  # screens above the answer
    back.click()
    assert page.evaluate("document.activeElement.classList.contains('cm-content')")
    assert in_view(page, editor)
    page.context.close()


def test_the_lesson_coach_answer_offers_no_way_back(browser: Any, live_server: LiveServer) -> None:
    page, _ = sign_up(browser, live_server, **PHONE)
    page.goto(LESSON_URL)
    panel = page.locator("#coach")
    panel.get_by_label("Your question").fill("What does set_epoch change?")
    panel.get_by_role("button", name="Ask", exact=True).click()
    panel.locator('[data-role="coach-status"]', has_text="answered").wait_for()
    assert panel.locator('[data-role="coach-back"]').is_hidden()  # no exercise to go back to
    page.context.close()


def test_a_skip_link_leads_from_the_top_to_the_exercise(phone: Any) -> None:
    phone.goto(LESSON_URL)
    phone.keyboard.press("Tab")
    phone.keyboard.press("Tab")
    skip = phone.locator("a.skip-link[data-skip=exercises]")
    assert phone.evaluate("document.activeElement.dataset.skip") == "exercises"
    assert skip.inner_text() == "Skip to the exercise"
    phone.keyboard.press("Enter")
    # The lesson's first exercise card is shown and holds the focus.
    in_exercise = "!!document.activeElement.closest('.step-card--exercise')"
    phone.wait_for_function(in_exercise)
    phone.keyboard.press("Tab")  # on into the exercise, not back to the top of the page
    assert phone.evaluate(in_exercise)


def test_code_that_scrolls_sideways_is_a_keyboard_stop_and_code_that_fits_is_not(
    phone: Any,
) -> None:
    phone.goto(LESSON_URL + "?step=2")
    blocks = phone.locator("main pre:visible").evaluate_all(
        "els => els.map(e => [e.scrollWidth > e.clientWidth + 1, e.tabIndex])"
    )
    assert any(scrolls for scrolls, _ in blocks), blocks  # the page has such a block on a phone
    assert all(tab == 0 for scrolls, tab in blocks if scrolls), blocks
    assert all(tab == -1 for scrolls, tab in blocks if not scrolls), blocks


def test_step_links_are_at_least_24_px_tall(phone: Any) -> None:
    phone.goto(LESSON_URL)
    heights = phone.locator(".step-index a").evaluate_all(
        "els => els.map(e => e.getBoundingClientRect().height)"
    )
    assert heights and min(heights) >= 24, heights


@pytest.mark.parametrize(("locale", "words"), [("en", "no page"), ("tr", "sayfa yok")])
def test_a_missing_page_speaks_to_the_learner(phone: Any, locale: str, words: str) -> None:
    answer = phone.goto(f"/lessons/no-such-lesson/nor-this?locale={locale}")
    assert answer is not None and answer.status == 404
    text = phone.locator("main").inner_text()
    assert words in text and "openapi" not in text.lower()
    assert phone.locator("main a[href='/']").is_visible()


def test_after_submit_the_status_and_timer_stay_above_the_sticky_bar_until_the_verdict(
    browser: Any, live_server: LiveServer
) -> None:
    """Issue 38: on a phone, after Submit, "Submitting…" then the stage and the timer were below
    the fold, under the sticky Previous/Next bar, for the whole run. The submission is held by
    the test (no grading): what is on screen while it waits."""
    page, _ = sign_up(browser, live_server, **PHONE)
    page.goto(f"{LESSON_URL}#exercise-train")
    section = page.locator('section.sub[data-exercise="ddp-fundamentals/train"]')
    section.locator(".cm-content").wait_for()
    held: list[Any] = []
    page.route("**/api/v1/submissions", lambda route: held.append(route))
    submit = section.locator('[data-role="submit"]')
    # Scrolled as a thumb leaves it: Submit just above the sticky bar, what follows hidden.
    submit.evaluate(
        """b => window.scrollBy(0, b.getBoundingClientRect().bottom
               - document.querySelector('.step-nav').getBoundingClientRect().top + 4)"""
    )
    submit.click()
    status = section.locator('[data-role="status"]')
    status.filter(has_text="Submitting").wait_for()
    section.evaluate("s => s.rdvExercise.startTimer()")  # what a started run shows next
    section.locator('[data-role="timer"]').filter(has_text="elapsed").wait_for()
    bar = page.locator(".step-nav").bounding_box()
    assert bar is not None and bar["y"] < 844
    for part in (status, section.locator('[data-role="timer"]')):
        box = part.bounding_box()
        assert box is not None, part
        assert box["y"] >= 0 and box["y"] + box["height"] <= bar["y"], (box, bar)
    for route in held:  # never sent: nothing is graded
        route.abort()
    page.context.close()
