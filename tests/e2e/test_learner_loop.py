"""The verdict and the way on, in Chromium: the verdict banner scrolled into view and focused,
failed checks first then not judged, passes collapsed, "rank N, line L" moves the editor's cursor,
a pass offers the next step; the lesson's last step leads on instead of dead-ending; Previous/Next
keep the buttons in place on a phone; keyboard tips only where there is a keyboard."""

from __future__ import annotations

import re
from typing import Any

from tests.e2e.conftest import LiveServer
from tests.e2e.results import failed_result, passed_result

LESSON_URL = "/lessons/ddp-fundamentals"
SECTION = 'section.sub[data-exercise="ddp-fundamentals/train"]'


def open_exercise(page: Any, selector: str = SECTION) -> Any:
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


def test_the_last_step_leads_on_to_the_quick_check(page: Any) -> None:
    page.goto(LESSON_URL + "?step=99")
    after = page.locator('[data-step-nav="after"]')
    assert after.is_visible() and page.locator('[data-step-nav="next"]').is_hidden()
    meter = page.locator(".step-meter")
    parts = int(meter.get_attribute("data-parts") or 0)
    steps = page.locator(".step-card").count()
    assert parts == steps + 1 + page.locator(".exercise").count()  # steps, quiz, exercises

    assert int(meter.get_attribute("max") or 0) == parts
    assert meter.evaluate("m => m.value") == steps
    after.click()
    page.wait_for_url(re.compile(r"#quiz$"))
    page.wait_for_function("v => document.querySelector('.step-meter').value === v", arg=steps + 1)
    page.locator('[data-step-nav="prev"]').click()
    assert after.is_hidden() and page.locator('[data-step-nav="next"]').is_visible()


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
        before = next_link.bounding_box()
        next_link.click()
        after = next_link.bounding_box()
        assert before is not None and after is not None
        assert page.locator("#step-status").inner_text().startswith("Step 2")
        # The card above may be shorter or longer; the page never jumps to the top of the card
        # when it is on screen already, so the button stays within reach of the thumb.
        assert 0 <= after["y"] <= 844
    finally:
        context.close()


def test_with_a_keyboard_the_tips_show(page: Any) -> None:
    page.goto(LESSON_URL)
    assert page.locator(".steps .keyboard-only").is_visible()
