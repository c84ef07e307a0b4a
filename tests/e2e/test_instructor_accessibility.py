"""The instructors' pages in Chromium: axe-core finds no serious or critical violation on
/instructor/analytics and /instructor/coach, in English and Turkish, and the analytics page
fits a phone's width. `make screenshots` shoots the same pages (INSTRUCTOR_PAGES)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.e2e.accounts import register_and_sign_in
from tests.e2e.conftest import LiveServer
from tests.e2e.test_accessibility import violations
from tests.e2e.test_instructor_struggles import make_instructor


def sign_in_as_instructor(page: Any, server: LiveServer, next_path: str) -> None:
    email = f"teacher-{uuid.uuid4().hex[:12]}@example.org"
    register_and_sign_in(
        page, name="Prof", email=email, password="correct horse battery staple", next="/"
    )
    make_instructor(server, email)
    page.goto(next_path)


def instructor_analytics(page: Any, server: LiveServer) -> None:
    sign_in_as_instructor(page, server, "/instructor/analytics?lesson_id=ddp-fundamentals")
    page.locator('[data-role="analytics-steps"]').wait_for()


def instructor_analytics_by_language(page: Any, server: LiveServer) -> None:
    sign_in_as_instructor(page, server, "/instructor/analytics?lesson_id=ddp-fundamentals")
    page.locator('input[name="by_locale"]').check()
    page.locator("form.struggles__filter button[type=submit]").click()
    page.locator('[data-role="analytics-steps"] tr[data-locale=""]').first.wait_for()


def instructor_coach(page: Any, server: LiveServer) -> None:
    sign_in_as_instructor(page, server, "/instructor/coach")
    page.locator('[data-role="struggles-total"]').wait_for()


INSTRUCTOR_PAGES = [instructor_analytics, instructor_analytics_by_language, instructor_coach]


@pytest.mark.parametrize("locale", ["en", "tr"])
@pytest.mark.parametrize("open_page", INSTRUCTOR_PAGES, ids=[p.__name__ for p in INSTRUCTOR_PAGES])
def test_no_serious_or_critical_violations(
    browser: Any, live_server: LiveServer, open_page: Any, locale: str
) -> None:
    context = browser.new_context(base_url=live_server.url, locale=locale, bypass_csp=True)
    context.add_cookies([{"name": "rdv_locale", "value": locale, "url": live_server.url}])
    try:
        page = context.new_page()
        open_page(page, live_server)
        assert page.evaluate("document.documentElement.lang") == locale
        assert violations(page) == []
    finally:
        context.close()


def test_the_analytics_page_fits_a_phone(browser: Any, live_server: LiveServer) -> None:
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 390, "height": 844}, is_mobile=True
    )
    try:
        page = context.new_page()
        instructor_analytics(page, live_server)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        bars = page.locator('[data-role="analytics-steps"] svg.bar')
        assert bars.count() >= 2  # reached and completed, for every step
        csv = page.locator('a[href^="/api/v1/instructor/analytics/steps.csv"]')
        with page.expect_download() as download:
            csv.click()
        assert download.value.suggested_filename == "ddp-fundamentals-steps.csv"
    finally:
        context.close()
