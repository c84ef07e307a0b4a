"""The instructors' view in headless Chromium: a learner's "Why did this fail?" on a really graded
run shows up, by check and by pseudonym, on /instructor/coach for an account that
`python -m app role` made an instructor; a learner gets the 404 page; the phone layout holds."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from app.config import REPO_ROOT
from tests.e2e.conftest import LiveServer
from tests.e2e.test_coach import LESSON_URL, sign_up, store_graded_run


def make_instructor(server: LiveServer, email: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "role", email, "instructor"],
        cwd=REPO_ROOT,
        env={**os.environ, "RDV_DATABASE_URL": server.database_url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_why_did_this_fail_reaches_the_instructors_view(
    browser: Any, live_server: LiveServer
) -> None:
    learner, learner_email = sign_up(browser, live_server, viewport={"width": 1280, "height": 900})
    store_graded_run(live_server, learner_email, "bug_no_set_epoch")
    learner.goto(f"{LESSON_URL}#exercise-train")  # the exercise's card
    failed = learner.locator('.sub__check[data-check="sampler.set_epoch"]')
    failed.get_by_role("button", name="Why did this fail?").click()
    learner.locator('#coach [data-role="coach-text"] h3').first.wait_for()
    missing = learner.goto("/instructor/coach")
    assert missing is not None and missing.status == 404  # a learner: no such page

    teacher, teacher_email = sign_up(
        browser, live_server, viewport={"width": 390, "height": 844}, is_mobile=True
    )
    make_instructor(live_server, teacher_email)
    # Turkish through the language chooser (a cookie), so the filter form's page keeps it.
    shown = teacher.goto("/locale/tr?next=/instructor/coach")
    assert shown is not None and shown.status == 200
    assert teacher.get_by_role("heading", name="Öğrencilerin zorlandığı yerler").is_visible()
    row = teacher.locator('[data-role="struggles-checks"] tr[data-check="sampler.set_epoch"]')
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "ddp-fundamentals/train"
    assert int(cells[2]) >= 1 and int(cells[3]) >= 1  # asked about it, with the button
    recent = teacher.locator('[data-role="struggles-recent"] li').first
    text = recent.inner_text()
    assert "Öğrenci " in text and "Bu neden başarısız oldu?" in text
    assert "Ada" not in text and learner_email not in teacher.content()
    # Phone layout: the tables scroll inside their box; the page is never wider than the screen.
    assert teacher.evaluate("document.documentElement.scrollWidth") <= 390
    # The filter works from the keyboard: pick another lesson, submit, nothing was asked there.
    teacher.get_by_label("Ders").select_option("syncbn-sharded-state")
    teacher.get_by_role("button", name="Göster").press("Enter")
    teacher.wait_for_url("**lesson_id=syncbn-sharded-state**")
    assert teacher.get_by_text("Bu dönemde hiçbir öğrenci koça bir şey sormadı.").is_visible()
    learner.context.close()
    teacher.context.close()
