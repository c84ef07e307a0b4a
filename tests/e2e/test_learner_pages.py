"""Issue 10's remaining points, in Chromium: a stored Result shown in the viewer's language
whatever the code was submitted in; the sample picture legible when every rank saw every sample;
account pages with labels above inputs, 44 px targets and errors tied to their fields; lesson
assets served compressed and cached for a year."""

from __future__ import annotations

from typing import Any

from app.content.service import get_exercise
from grader.i18n import localize_result
from tests.coach.conftest import EXERCISE, run_of
from tests.e2e.conftest import LiveServer
from tests.e2e.results import failed_result
from tests.e2e.test_coach import sign_up, store_graded_run
from tests.e2e.test_page_weight import LESSON_URL

SECTION = f'section.sub[data-exercise="{EXERCISE}"]'
PHONE = {"width": 390, "height": 844}


def test_a_stored_result_is_shown_in_the_viewer_s_language(
    browser: Any, live_server: LiveServer
) -> None:
    page, email = sign_up(browser, live_server)
    store_graded_run(live_server, email, "bug_no_set_epoch")  # graded in English
    _code, stored = run_of("bug_no_set_epoch")
    shown = localize_result(stored, "tr", get_exercise(EXERCISE).spec.hints)
    page.goto(f"{LESSON_URL}?locale=tr#exercise-train")  # the exercise's card
    section = page.locator(SECTION)
    summary = section.locator(".sub__summary--fail")
    summary.wait_for()
    assert shown["summary"] in summary.inner_text()
    failed = section.locator('.sub__check[data-status="fail"]').first
    first = next(check for check in shown["checks"] if check["status"] == "fail")
    english = next(check for check in stored["checks"] if check["id"] == first["id"])
    assert first["title"] != english["title"]  # a Turkish title to show
    assert first["title"] in failed.inner_text()
    assert english["title"] not in failed.inner_text()
    page.context.close()


def test_the_sample_picture_is_legible_when_every_rank_saw_everything(
    browser: Any, live_server: LiveServer
) -> None:
    page, _email = sign_up(browser, live_server, viewport=PHONE, is_mobile=True)
    page.goto(f"{LESSON_URL}#exercise-train")
    section = page.locator(SECTION)
    section.locator(".cm-content").wait_for()
    section.evaluate("(s, r) => s.rdvExercise.showResult('done', r, true)", failed_result())
    picture = section.locator(".sub__sampler-svg")
    picture.wait_for()
    fills = picture.locator('rect[data-owner="overlap"]').evaluate_all(
        "els => els.map(e => e.getAttribute('fill'))"
    )
    assert fills and set(fills) == {"url(#rdv-overlap)"}  # stripes, not a solid bar
    assert picture.locator("pattern#rdv-overlap path").count() >= 2
    legend = section.locator(".sub__legend").inner_text()
    assert "seen by two or more ranks" in legend and "Rank 0" in legend
    rows = section.locator(".sub__sampler-rows li")  # the same in words
    assert rows.count() == picture.locator("g[data-epoch]").count()
    assert "seen twice or more" in rows.first.inner_text()
    page.context.close()


def test_account_pages_on_a_phone_labels_above_44_px_targets_errors_tied(
    browser: Any, live_server: LiveServer
) -> None:
    context = browser.new_context(base_url=live_server.url, viewport=PHONE, is_mobile=True)
    try:
        page = context.new_page()
        for path in ("/login", "/register"):
            page.goto(path)
            fields = page.locator("form.auth-form .field")
            assert fields.count() >= 2
            for index in range(fields.count()):
                label = fields.nth(index).locator("label").bounding_box()
                field = fields.nth(index).locator("input").bounding_box()
                assert label is not None and field is not None
                assert label["y"] + label["height"] <= field["y"]  # the label above
                assert field["height"] >= 44
            button = page.locator("form.auth-form button[type=submit]").bounding_box()
            assert button is not None and button["height"] >= 44
        page.goto("/login")
        page.fill("#email", "nobody@example.org")
        page.fill("#password", "not the password")
        page.locator("form.auth-form button[type=submit]").click()
        error = page.locator(".field-error")
        error.wait_for()
        field = page.locator(".field--invalid input")
        assert field.get_attribute("aria-invalid") == "true"
        described = (field.get_attribute("aria-describedby") or "").split()
        assert error.get_attribute("id") in described
    finally:
        context.close()


def test_lesson_assets_are_compressed_and_cached_for_a_year(
    browser: Any, live_server: LiveServer
) -> None:
    page, _email = sign_up(browser, live_server)
    responses: list[Any] = []
    page.on("response", lambda response: responses.append(response))
    page.goto(LESSON_URL, wait_until="networkidle")
    assets = [r for r in responses if r.request.resource_type in ("script", "stylesheet")]
    assert any("codemirror" in r.url for r in assets)
    for response in assets:
        headers = response.headers
        assert headers.get("cache-control") == "public, max-age=31536000, immutable", response.url
        assert headers.get("content-encoding") == "gzip", response.url
    page.context.close()
