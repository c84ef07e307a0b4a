"""The result's timeline in the result panel, in Chromium: drawn from the Result's `timeline` when
it arrives (static/js/timeline.js, loaded then), failing launch first, with the sentences that say
what to look at (the overlap or its absence, where the ranks parted, the kill and the restart) and
a table of the same events; at desktop and phone width, in English and Turkish; axe finds nothing
moderate, serious or critical in the result panel.

The timelines are real: `fixtures/timeline_<exercise>-<kind>.json` is the `timeline` of a Result
graded by tests/grader/exercises/test_exercise_timeline.py (RDV_TIMELINE_RESULTS=<folder> keeps
them). Screenshots of the panel go to $RDV_SCREENSHOTS (default /tmp/rdv-timeline-shots), to be
looked at; they are not committed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import LiveServer, sign_up
from tests.e2e.results import failed_result
from tests.e2e.test_accessibility import AXE, SCREENS

FIXTURES = Path(__file__).parent / "fixtures"
LESSON_URL = "/lessons/ddp-fundamentals"
SECTION = 'section.sub[data-exercise="ddp-fundamentals/train"]'
SHOTS = Path(os.environ.get("RDV_SCREENSHOTS", "/tmp/rdv-timeline-shots"))
# Fixture -> what the figures' sentences must say, per locale.
CASES = {
    "overlap-buckets-solution": {
        "en": "began while backward was still running",
        "tr": "backward hâlâ çalışırken",
    },
    "overlap-buckets-starter": {
        "en": "nothing overlapped the backward pass",
        "tr": "hiçbir şey üst üste binmedi",
    },
    "find-the-hang-starter": {"en": "The ranks parted at collective #", "tr": "Rank'ler"},
    "elastic-resume-solution": {"en": "The job restarted at", "tr": "yeniden başladı"},
}


def timeline(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"timeline_{name}.json").read_text("utf-8"))
    return data


def panel_violations(page: Any) -> list[dict[str, Any]]:
    """axe's moderate, serious and critical violations inside the result panel."""
    page.add_script_tag(path=str(AXE))
    found: list[dict[str, Any]] = page.evaluate(
        """async (selector) => {
          const panel = document.querySelector(selector);
          const run = await axe.run(panel, { resultTypes: ["violations"] });
          return run.violations.map(v => ({ id: v.id, impact: v.impact,
            nodes: v.nodes.map(n => n.target.join(" ")) }));
        }""",
        f'{SECTION} [data-role="results"]',
    )
    return [v for v in found if v["impact"] in ("moderate", "serious", "critical")]


def show(page: Any, section: Any, name: str, locale: str) -> Any:
    result = failed_result(locale)
    result["timeline"] = timeline(name)
    section.evaluate("(s, r) => s.rdvExercise.showResult('done', r, false)", result)
    box = section.locator('[data-role="timeline"]')
    box.locator(".tl-figure svg").first.wait_for()
    return box


@pytest.mark.parametrize("screen", sorted(SCREENS))
@pytest.mark.parametrize("locale", ["en", "tr"])
def test_the_timeline_under_the_checks(
    browser: Any, live_server: LiveServer, locale: str, screen: str
) -> None:
    context = browser.new_context(
        base_url=live_server.url, locale=locale, bypass_csp=True, **SCREENS[screen]
    )
    context.set_default_timeout(20_000)
    context.add_cookies([{"name": "rdv_locale", "value": locale, "url": live_server.url}])
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        page = context.new_page()
        sign_up(page, LESSON_URL)
        page.goto(f"{LESSON_URL}#exercise-train")
        section = page.locator(SECTION)
        section.locator(".cm-content").wait_for()
        for name, said in CASES.items():
            data = timeline(name)
            box = show(page, section, name, locale)
            figures = box.locator(".tl-figure")
            assert figures.count() == len(data["launches"])
            first = data["launches"][0]
            assert figures.first.get_attribute("data-launch") == str(first["launch"])
            assert said[locale] in " ".join(box.locator(".tl-notes").all_inner_texts())
            # Under the checks: the panel's check list comes before it.
            checks = section.locator('[data-role="checks"]').bounding_box()
            assert checks is not None and box.bounding_box()["y"] > checks["y"]
            # The table says what the picture shows: a row per item, per omission, per lane end.
            rows = figures.first.locator("table.tl-table tbody tr").count()
            lanes = first["lanes"]
            want = sum(len(x["items"]) + len(x.get("omitted", [])) + 1 for x in lanes)
            assert rows == want
            svg = figures.first.locator("svg")
            if name == "find-the-hang-starter":
                assert svg.locator('[data-parted="true"]').count() >= 1
            if name == "elastic-resume-solution":
                restarted = next(x for x in data["launches"] if x["faulted"])
                fig = box.locator(f'.tl-figure[data-launch="{restarted["launch"]}"] svg')
                assert fig.locator('[data-kind="restart"]').count() == len(restarted["lanes"])
                assert fig.locator('[data-kind="fault"]').count() == 1
                assert fig.locator('[data-kind="load"]').count() >= 1
            if name.startswith("overlap-buckets"):
                assert svg.locator('[data-kind="backward"]').count() >= 1
                assert svg.locator('[data-kind="collective"]').count() >= 1
            # Phone: the picture scrolls inside the panel, the page itself does not.
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= page.viewport_size["width"] + 1
            zoom = figures.first.locator('[data-zoom="in"]')
            zoom.click()
            scroller = figures.first.locator(".tl-scroll")
            assert scroller.evaluate("n => n.scrollWidth > n.clientWidth")
            assert page.evaluate("document.documentElement.scrollWidth") <= (
                page.viewport_size["width"] + 1
            )
            figures.first.locator('[data-zoom="out"]').click()
            box.screenshot(path=str(SHOTS / f"{name}-{locale}-{screen}.png"))
            assert panel_violations(page) == [], name
    finally:
        context.close()


def test_the_timeline_loads_under_the_sites_csp_without_an_error(page: Any) -> None:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_up(page, LESSON_URL)
    page.goto(f"{LESSON_URL}#exercise-train")
    section = page.locator(SECTION)
    section.locator(".cm-content").wait_for()
    assert page.locator('script[src*="timeline"]').count() == 0  # nothing before a result
    box = show(page, section, "find-the-hang-starter", "en")
    assert box.is_visible()
    assert page.locator('link[href*="timeline"]').count() == 1
    assert errors == []
