"""The exercise flow in headless Chromium against a real server grading with the real grader:
open lesson 2, type into the editor, submit, watch each rank's output arrive, read the result.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.content.service import get_exercise
from tests.e2e.accounts import register_and_sign_in
from tests.e2e.conftest import LiveServer, start_live_server, stop_live_server

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

EXERCISE = "ddp-fundamentals/train"
LESSON_URL = "/lessons/ddp-fundamentals"
SECTION = 'section.sub[data-exercise="ddp-fundamentals/train"]'
GRADE_TIMEOUT_MS = 240_000  # a hang guard for a loaded 2-core machine, not a speed target
_numbers = itertools.count(1)


@pytest.fixture(scope="module")
def grading_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server whose in-process grading backend runs (off by default in RDV_ENVIRONMENT=test)."""
    server = start_live_server(
        tmp_path_factory.mktemp("grading-server"), {"RDV_GRADING_AUTOSTART": "1"}
    )
    yield server
    stop_live_server(server)


def signed_in_page(browser: Any, server: LiveServer, **context_options: Any) -> Any:
    context = browser.new_context(base_url=server.url, **context_options)
    context.set_default_timeout(30_000)
    page = context.new_page()
    email = f"e2e-submit-{next(_numbers)}-{time.time_ns()}@example.org"
    register_and_sign_in(page, name="Ada", email=email, password="correct horse battery staple")
    return page


def open_exercise(page: Any) -> Any:
    page.goto(f"{LESSON_URL}#exercise-train")  # the exercise's card in the lesson's sequence
    section = page.locator(SECTION)
    section.locator(".cm-content").wait_for()
    return section


def replace_code(page: Any, section: Any, code: str) -> None:
    """Type into CodeMirror: select everything, then enter the new text."""
    section.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)


def last_result(page: Any) -> dict[str, Any]:
    """The learner's latest Result, read through the API with the page's own session."""
    listed = page.request.get(f"/api/v1/submissions?exercise={EXERCISE}&limit=1").json()
    latest = page.request.get(f"/api/v1/submissions/{listed['submissions'][0]['id']}").json()
    return dict(latest["result"])


def editor_text(section: Any) -> str:
    """The whole document (CodeMirror renders only the lines in view)."""
    return str(section.evaluate("s => s.rdvExercise.editor.getValue()"))


def test_submitting_a_fix_streams_rank_output_and_passes(
    browser: Any, grading_server: LiveServer
) -> None:
    page = signed_in_page(browser, grading_server, viewport={"width": 1280, "height": 900})
    section = open_exercise(page)
    solution = get_exercise(EXERCISE).solution_path.read_text("utf-8")
    replace_code(page, section, solution)
    assert editor_text(section) == solution
    # The draft reaches the server too (another device or a cleared browser finds it).
    section.locator('[data-role="draft"]', has_text="Draft saved.").wait_for()

    submit = section.locator('[data-role="submit"]')
    submit.click()
    assert submit.is_disabled()  # no second submission while this one runs

    # Each rank's lines arrive in its own pane while the program runs.
    for rank in (0, 1):
        pane = section.locator(f'.sub__rank[data-rank="{rank}"] pre')
        pane.filter(has_text=f"rank {rank} epoch").first.wait_for(timeout=GRADE_TIMEOUT_MS)
    summary = section.locator(".sub__summary--pass")
    summary.wait_for(timeout=GRADE_TIMEOUT_MS)
    statuses = section.locator(".sub__check").evaluate_all("els => els.map(e => e.dataset.status)")
    assert statuses and set(statuses) <= {"pass", "skip"}
    assert statuses.count("pass") >= 8
    assert not submit.is_disabled()
    # The sampler picture: every rank of the deciding run has its colour, and no overlap.
    world_size = last_result(page)["artifacts"]["sampler"]["world_size"]
    owners = section.locator(".sub__sampler-svg rect").evaluate_all(
        "els => els.map(e => e.dataset.owner)"
    )
    assert set(owners) - {"unseen"} == {str(rank) for rank in range(world_size)}

    # A reload keeps the learner's code (the draft) and shows the last result.
    page.reload()
    section = page.locator(SECTION)
    section.locator(".sub__summary--pass").wait_for()
    assert editor_text(section) == solution
    page.context.close()


def test_the_starter_fails_with_hints_and_the_sampler_picture_on_a_phone(
    browser: Any, grading_server: LiveServer, tmp_path: Path
) -> None:
    screenshot_dir = tmp_path
    page = signed_in_page(browser, grading_server, viewport={"width": 360, "height": 740})
    section = open_exercise(page)
    # Keyboard only: Escape then Tab leaves the editor for the Submit button.
    section.locator(".cm-content").click()
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.role") == "submit"
    # Every stage the learner is shown, in order (the status line is a live region).
    section.evaluate(
        """s => { window.rdvStages = [];
          const line = s.querySelector('[data-role="status"]');
          new MutationObserver(() => window.rdvStages.push(line.textContent))
            .observe(line, { childList: true, subtree: true }); }"""
    )
    page.keyboard.press("Enter")  # submit the starter as it is
    section.locator('[data-role="timer"]', has_text="elapsed").wait_for()

    section.locator(".sub__summary--fail").wait_for(timeout=GRADE_TIMEOUT_MS)
    stages = [text for text in page.evaluate("window.rdvStages") if text]
    launches = [text for text in stages if text.startswith("Launch ")]
    assert launches and launches[0].startswith("Launch 1 of "), stages
    assert any(text.startswith("Checking") for text in stages), stages
    # The verdict is on screen and focused; failed checks first; passes collapsed.
    assert page.evaluate("document.activeElement.dataset.role") == "summary"
    failed = section.locator('.sub__check[data-status="fail"]')
    result = last_result(page)
    expected = [check["id"] for check in result["checks"] if check["status"] == "fail"]
    assert expected and failed.evaluate_all("els => els.map(e => e.dataset.check)") == expected
    hints = section.locator('.sub__check[data-status="fail"] .sub__hint')
    assert hints.count() == failed.count()  # every failed check says what to try
    assert section.locator(".sub__check").count() == len(result["checks"])
    picture = section.locator(".sub__sampler-svg")
    picture.wait_for()
    owners = picture.locator("rect").evaluate_all("els => els.map(e => e.dataset.owner)")
    if result["artifacts"]["sampler"]["world_size"] > 1:
        assert "overlap" in owners  # every rank trained on the whole dataset
    # Nothing overflows a 360 px screen.
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    page.screenshot(path=str(screenshot_dir / "submit-phone.png"), full_page=True)
    page.context.close()


HANG_RESULT = {
    "version": 1,
    "status": "fail",
    "summary": "The ranks hung",
    "checks": [
        {
            "id": "run.completed",
            "status": "fail",
            "title": "Every rank runs to the end",
            "message": "Rank 1 waited in `all_reduce` for 30 s.",
            "hint": "Every rank must call the same collectives in the same order.",
            "rank": 1,
            "line": 12,
        }
    ],
    "ranks": [
        {"rank": 0, "exit_code": None, "output": "", "stack": 'File "main.py", line 10, in main'},
        {"rank": 1, "exit_code": None, "output": "", "stack": 'File "main.py", line 12, in main'},
    ],
    "artifacts": {},
}


def test_a_hang_shows_each_ranks_stack(browser: Any, grading_server: LiveServer) -> None:
    """The results panel for a hung run (rendered from a Result, without waiting for a hang)."""
    page = signed_in_page(browser, grading_server, viewport={"width": 360, "height": 740})
    section = open_exercise(page)
    section.evaluate("(s, result) => s.rdvExercise.showResult('done', result, true)", HANG_RESULT)
    stacks = section.locator('[data-role="stacks"] details')
    assert stacks.count() == 2
    assert "line 12" in stacks.nth(1).inner_text()
    assert (
        section.locator('.sub__check[data-check="run.completed"] code').inner_text() == "all_reduce"
    )
    assert "rank 1, line 12" in section.locator(".sub__where").inner_text()
    page.context.close()
