"""What a visitor's walk through lesson 1 records and shows (issue 38): the step just before a
quick check counts as done when the learner moves on to the question; a link straight to an
exercise reaches that card, not step 1; the starter shows its comments in the learner's language
(tr), or says that they are in English."""

from __future__ import annotations

import uuid
from typing import Any

from app.config import REPO_ROOT
from app.content.loader import load_catalog
from tests.e2e.accounts import sign_in_after_registering
from tests.e2e.conftest import LiveServer

LESSON = "data-vs-model-parallelism"
CARDS = load_catalog(REPO_ROOT / "lessons").lessons[LESSON].lesson.cards()
BEFORE_QUIZ = next(n for n, (kind, _) in enumerate(CARDS, 1) if kind == "question") - 1


def outbox(page: Any) -> list[dict[str, Any]]:
    page.wait_for_timeout(300)  # the outbox is written just after the card is shown
    events: list[dict[str, Any]] = page.evaluate("RdvClient.pending()")
    return events


def test_the_step_before_a_quiz_is_done_when_the_question_is_shown(page: Any) -> None:
    assert CARDS[BEFORE_QUIZ - 1][0] == "step"
    step_id = CARDS[BEFORE_QUIZ - 1][1]
    page.goto(f"/lessons/{LESSON}?step={BEFORE_QUIZ}")
    page.click('[data-step-nav="next"]')  # on to the first question
    page.locator(".step-card--quiz:not([hidden])").wait_for()
    done = [e["step_id"] for e in outbox(page) if e["type"] == "step_completed"]
    assert done == [step_id]
    assert page.locator(f'[data-step-link="{BEFORE_QUIZ}"].is-completed').count() == 1


def test_a_link_to_an_exercise_reaches_the_exercise_not_step_1(page: Any) -> None:
    page.goto(f"/lessons/{LESSON}#exercise-allreduce-by-hand")
    page.locator(".step-card--exercise:not([hidden])").wait_for()
    assert outbox(page) == []  # no position on step 1, nothing completed


def test_the_starter_s_comments_follow_the_learner_s_language(
    browser: Any, live_server: LiveServer
) -> None:
    context = browser.new_context(base_url=live_server.url, locale="tr")
    context.add_cookies([{"name": "rdv_locale", "value": "tr", "url": live_server.url}])
    try:
        page = context.new_page()
        page.goto(f"/lessons/{LESSON}#exercise-allreduce-by-hand")
        card = page.locator("#exercise-allreduce-by-hand")
        code = card.locator(".exercise-preview__code")
        code.wait_for()
        assert "İki TODO fonksiyonunu doldurun" in code.inner_text()
        assert "# TODO: her parametrenin rank 0'daki" in code.inner_text()
        assert card.locator('[data-role="starter-fallback"]').count() == 0
        page.goto(f"/lessons/{LESSON}#exercise-overlap-buckets")  # no translation: said so
        note = page.locator('#exercise-overlap-buckets [data-role="starter-fallback"]')
        assert "İngilizce" in note.inner_text() and note.is_visible()
    finally:
        context.close()


def test_the_welcome_notice_is_on_screen_after_signing_up_from_an_exercise(page: Any) -> None:
    """Issue 38: landing back on the exercise's card scrolled the notice off screen (y = -294)."""
    page.goto(f"/lessons/{LESSON}#exercise-allreduce-by-hand")
    preview = page.locator("#exercise-allreduce-by-hand .exercise-preview")
    back = preview.get_by_role("link", name="Create an account").get_attribute("href")
    assert back is not None and back.startswith("/register?next=")
    email = f"e2e-{uuid.uuid4().hex[:12]}@example.org"
    password = "correct horse battery staple"
    page.goto(back)
    page.fill("#display_name", "Ada")
    page.fill("#email", email)
    page.fill("#password", password)
    page.locator("form.auth-form button[type=submit]").click()
    page.wait_for_selector('[data-testid="registered"]')
    sign_in_after_registering(page, email=email, password=password)
    page.wait_for_load_state("load")
    welcome = page.locator(".notice--welcome")
    welcome.wait_for()
    page.wait_for_timeout(500)  # the page settles: fragment scroll, the welcome's own
    box = welcome.bounding_box()
    assert box is not None and 0 <= box["y"] < page.viewport_size["height"], box
    assert page.evaluate("document.activeElement.classList.contains('notice--welcome')")


def test_a_rank_that_died_in_cpp_gets_an_error_box(page: Any) -> None:
    """Issue 38: gloo's abort leaves no Python traceback, only a fatal dump and C++ lines; the
    rank's pane still opens with its error end (the learner's line, the abort and its reason)."""
    from tests.e2e.conftest import sign_up
    from tests.e2e.results import failed_result

    sign_up(page, "/lessons/ddp-fundamentals")
    page.goto("/lessons/ddp-fundamentals#exercise-train")
    section = page.locator('section.sub[data-exercise="ddp-fundamentals/train"]')
    section.locator(".cm-content").wait_for()
    result = failed_result()
    aborted = {
        "rank": 0,
        "exit_code": -6,
        "output": "epoch 0\nterminate called after throwing an instance of "
        "'gloo::EnforceNotMet'\n  what():  [enforce fail at pair.cc:446] op.preamble.length"
        " <= op.nbytes. 8 vs 4\n",
        "truncated": False,
        "stack": "Fatal Python error: Aborted\n\nCurrent thread (most recent call first):\n"
        '  File "main.py", line 54 in main\n  File "main.py", line 70 in <module>',
    }
    result["ranks"] = [aborted, *[r for r in result["ranks"] if r["rank"] != 0]]
    section.evaluate("(s, r) => s.rdvExercise.showResult('done', r, true)", result)
    box = section.locator(".sub__error-end").first
    box.wait_for()
    text = box.inner_text()
    assert 'File "main.py", line 54 in main' in text
    assert "Fatal Python error: Aborted" in text and "gloo::EnforceNotMet" in text
