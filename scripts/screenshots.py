"""`make screenshots`: desktop (1280x800) and phone (390x844) screenshots of the learner's pages,
written to screenshots/ (git-ignored) for review.

Pages: the course, a lesson step, the quick check answered, the exercise as a visitor sees it
and with a failed result,
sign-in (with its error), registration, the instructors' analytics (also split by language) and
coach pages, in English and Turkish; offline (a lesson read from the service worker's cache, the
offline page, a draft conflict); then a live submission of the
lesson-2 starter (the real grader, in the server's own sandbox) while it runs and when it ends;
then lesson 4's solutions, whose launches (a restarted run and its reference, a 2-node job) each
show their output in panes of their own.
Usage: python scripts/screenshots.py [--out DIR] [--no-live]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.e2e.accounts import register_and_sign_in  # noqa: E402
from tests.e2e.conftest import CHROMIUM, start_live_server, stop_live_server  # noqa: E402
from tests.e2e.test_accessibility import PAGES  # noqa: E402
from tests.e2e.test_instructor_accessibility import INSTRUCTOR_PAGES  # noqa: E402

VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
SECTION = 'section.sub[data-exercise="ddp-fundamentals/train"]'
GRADE_TIMEOUT_MS = 300_000


def new_context(browser: Any, url: str, viewport: str, locale: str) -> Any:
    """A fresh context at the viewport's size (a phone: mobile and touch) in `locale`."""
    width, height = VIEWPORTS[viewport]
    phone = viewport == "phone"
    context = browser.new_context(
        base_url=url,
        viewport={"width": width, "height": height},
        is_mobile=phone,
        has_touch=phone,
        locale=locale,
    )
    context.add_cookies([{"name": "rdv_locale", "value": locale, "url": url}])
    return context


def shoot_pages(browser: Any, url: str, out: Path) -> None:
    for name in VIEWPORTS:
        for locale in ("en", "tr"):
            for open_page in PAGES:  # a context each: some pages sign a learner up
                context = new_context(browser, url, name, locale)
                page = context.new_page()
                open_page(page)
                page.screenshot(path=str(out / f"{open_page.__name__}-{locale}-{name}.png"))
                context.close()


def shoot_instructor_pages(browser: Any, server: Any, out: Path) -> None:
    """The instructors' pages (an account made an instructor for each), full length."""
    for name in VIEWPORTS:
        for locale in ("en", "tr"):
            for open_page in INSTRUCTOR_PAGES:
                context = new_context(browser, server.url, name, locale)
                page = context.new_page()
                open_page(page, server)
                shot = out / f"{open_page.__name__}-{locale}-{name}.png"
                page.screenshot(path=str(shot), full_page=True)
                context.close()


def shoot_offline(browser: Any, url: str, out: Path) -> None:
    """A lesson read offline, the offline page, and a draft conflict (another device saved)."""
    from tests.e2e.test_offline import SECTION, new_learner, other_device, put_draft, worker_ready

    for name in VIEWPORTS:
        for locale in ("en", "tr"):
            context = new_context(browser, url, name, locale)
            page = context.new_page()
            email = new_learner(page, "/lessons/ddp-fundamentals#ex-train")
            page.locator(SECTION).locator(".cm-content").wait_for()
            worker_ready(page)
            page.wait_for_timeout(1500)  # the worker saves this lesson and the next
            context.set_offline(True)
            page.reload()
            page.screenshot(path=str(out / f"offline-lesson-{locale}-{name}.png"))
            page.goto("/lessons/torchrun-launch")
            page.wait_for_selector("#offline-title")
            page.screenshot(path=str(out / f"offline-page-{locale}-{name}.png"))
            page.goto("/lessons/ddp-fundamentals#ex-train")
            section = page.locator(SECTION)
            section.locator(".cm-content").click()
            page.keyboard.type("# edited offline\n")
            put_draft(url, other_device(url, email), "print('the other device')\n")
            context.set_offline(False)
            section.locator('[data-role="conflict"]').wait_for()
            section.locator('[data-role="see-both"]').click()
            section.locator('[data-role="conflict"]').scroll_into_view_if_needed()
            page.screenshot(path=str(out / f"offline-draft-conflict-{locale}-{name}.png"))
            context.close()


def sign_up(page: Any) -> None:
    """Register, then sign in (registering signs nobody in), and land on lesson 2."""
    register_and_sign_in(
        page,
        name="Ada",
        email=f"shots-{time.time_ns()}@example.org",
        password="correct horse battery staple",
        next="/lessons/ddp-fundamentals",
    )


def shoot_live(browser: Any, url: str, out: Path) -> None:
    for name, (width, height) in VIEWPORTS.items():
        phone = name == "phone"
        context = browser.new_context(
            base_url=url, viewport={"width": width, "height": height}, is_mobile=phone
        )
        page = context.new_page()
        sign_up(page)
        page.screenshot(path=str(out / f"welcome-en-{name}.png"))
        page.goto("/lessons/ddp-fundamentals#exercise-train")  # the exercise's card
        section = page.locator(SECTION)
        section.locator(".cm-content").wait_for()
        section.locator('[data-role="submit"]').click()
        shots: list[tuple[str, Callable[[Any], bool]]] = [
            ("launch", lambda s: "Launch" in s.locator('[data-role="status"]').inner_text()),
            ("output", lambda s: s.locator(".sub__rank").count() > 0),
        ]
        for label, ready in shots:
            deadline = time.monotonic() + GRADE_TIMEOUT_MS / 1000
            while not ready(section) and time.monotonic() < deadline:
                if section.locator(".sub__summary--fail, .sub__summary--pass").count():
                    break
                time.sleep(0.2)
            section.locator('[data-role="status"]').scroll_into_view_if_needed()
            page.screenshot(path=str(out / f"live-{label}-en-{name}.png"))
        section.locator(".sub__summary--fail, .sub__summary--pass").wait_for(
            timeout=GRADE_TIMEOUT_MS
        )
        page.screenshot(path=str(out / f"live-result-en-{name}.png"))
        page.screenshot(path=str(out / f"live-result-full-en-{name}.png"), full_page=True)
        context.close()


LESSON_4 = ("torchrun-launch/elastic-resume", "torchrun-launch/env-launch")


def shoot_lesson_4(browser: Any, url: str, out: Path) -> None:
    from app.content.service import get_exercise

    context = browser.new_context(base_url=url, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    sign_up(page)
    page.goto("/lessons/torchrun-launch")
    for exercise in LESSON_4:
        section = page.locator(f'section.sub[data-exercise="{exercise}"]')
        section.locator(".cm-content").wait_for()
        code = get_exercise(exercise).solution_path.read_text("utf-8")
        section.evaluate("(s, code) => s.rdvExercise.editor.setValue(code)", code)
        section.locator('[data-role="submit"]').click()
        section.locator(".sub__summary--fail, .sub__summary--pass, .sub__summary--error").wait_for(
            timeout=GRADE_TIMEOUT_MS
        )
        name = exercise.split("/")[1]
        section.locator('[data-role="output"]').screenshot(path=str(out / f"lesson4-{name}.png"))
    context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "screenshots")
    parser.add_argument("--no-live", action="store_true", help="skip the live submission")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = start_live_server(Path(tmp), {"RDV_GRADING_AUTOSTART": "1"})
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
                shoot_pages(browser, server.url, args.out)
                shoot_instructor_pages(browser, server, args.out)
                shoot_offline(browser, server.url, args.out)
                if not args.no_live:
                    shoot_live(browser, server.url, args.out)
                    shoot_lesson_4(browser, server.url, args.out)
                browser.close()
        finally:
            stop_live_server(server)
    print(f"screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
