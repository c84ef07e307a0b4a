"""In Chromium: a signed-in learner's steps are recorded by progress.js in the outbox of the
reference client (rdv-client.js) and sent through the progress API (cookie + CSRF header), and
the lesson page resumes there with completed steps marked."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

from tests.e2e.accounts import register, sign_in_after_registering
from tests.e2e.test_offline import outbox_empty

LESSON = "ddp-fundamentals"


def _is_sync(response: Any) -> bool:
    return "/api/v1/progress/events" in response.url and response.request.method == "POST"


def test_progress_is_recorded_and_the_page_resumes(page: Any) -> None:
    email, password = f"e2e-{uuid.uuid4().hex[:8]}@example.org", "correct horse battery"
    register(page, name="Chromium", email=email, password=password, next=f"/lessons/{LESSON}")
    with page.expect_response(_is_sync) as first:
        sign_in_after_registering(page, email=email, password=password)
    assert first.value.status == 200  # the position at load
    page.wait_for_load_state()
    assert urlsplit(page.url).path == f"/lessons/{LESSON}"  # with the welcome after registering

    for _ in range(2):
        with page.expect_response(_is_sync) as synced:
            page.click('[data-step-nav="next"]')
        assert synced.value.status == 200
    outbox_empty(page)

    state = page.request.get("/api/v1/progress").json()["lessons"][LESSON]
    steps = page.eval_on_selector_all(".step-card", "cards => cards.map(c => c.dataset.stepId)")
    assert state["completed_steps"] == sorted(steps[:2])
    assert state["last_step"] == steps[2]

    page.goto(f"/lessons/{LESSON}")  # no ?step=: resume where the learner was
    assert page.get_attribute("#steps", "data-current") == "3"
    assert page.is_visible(f"#step-{steps[2]}")
    completed = page.eval_on_selector_all(
        ".step-card.step-card--completed", "cards => cards.map(c => c.dataset.stepId)"
    )
    assert completed == steps[:2]
