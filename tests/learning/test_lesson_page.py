"""The lesson page with progress: completed steps marked, resume at the last position, and the
progress recorder loaded only for a signed-in learner."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.content import service as content
from tests.auth.factories import browser_sign_up

LESSON = "ddp-fundamentals"


def _current_step(html: str) -> int:
    match = re.search(r'id="steps"[^>]*data-current="(\d+)"', html, re.S)
    assert match, "no steps section"
    return int(match.group(1))


def test_a_visitor_starts_at_the_first_card_and_records_on_the_device(client: TestClient) -> None:
    """A visitor's steps and answers are kept on the device (progress.js's outbox) until they
    sign up or in; the page still opens on the first card."""
    page = client.get(f"/lessons/{LESSON}")
    assert page.status_code == 200
    assert "js/progress.js" in page.text
    assert '<meta name="rdv-account" content="visitor">' in page.text
    assert _current_step(page.text) == 1


def test_signed_in_learner_resumes_where_they_left_off(client: TestClient) -> None:
    token = browser_sign_up(client)
    steps = [step.id for step in content.localized_lesson(LESSON).steps]
    fresh = client.get(f"/lessons/{LESSON}")
    assert "js/progress.js" in fresh.text  # recorder loads even before any progress
    synced = client.post(
        "/api/v1/progress/events",
        headers={"X-CSRF-Token": token, "Origin": "http://testserver"},
        json={
            "events": [
                {
                    "id": "w1",
                    "type": "step_completed",
                    "lesson_id": LESSON,
                    "step_id": steps[0],
                    "at": "2026-01-01T10:00:00Z",
                },
                {
                    "id": "w2",
                    "type": "position",
                    "lesson_id": LESSON,
                    "step_id": steps[3],
                    "at": "2026-01-01T10:05:00Z",
                },
            ]
        },
    )
    assert synced.status_code == 200, synced.text
    page = client.get(f"/lessons/{LESSON}")
    assert _current_step(page.text) == 4
    assert re.search(rf'class="step-card step-card--completed"\s+id="step-{steps[0]}"', page.text)
    assert not re.search(rf'step-card--completed"\s+id="step-{steps[1]}"', page.text)
    # An explicit ?step= still wins over the saved position.
    assert _current_step(client.get(f"/lessons/{LESSON}?step=2").text) == 2
