"""The mobile flow against a real `python -m app serve` process (SQLite file and PostgreSQL):
register, token, lesson with ETag, sync twice with a cursor from two devices, revoke."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.served import served

LESSON = "ddp-fundamentals"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with served(request.param, tmp_path) as running:
        yield running.url


def test_mobile_flow_through_the_served_app(server: str) -> None:
    api = httpx.Client(base_url=f"{server}/api/v1", timeout=30)
    created = api.post(
        "/auth/register",
        json={
            "email": "phone@example.org",
            "password": "correct horse battery",
            "display_name": "Ada",
        },
    )
    assert created.status_code == 201, created.text

    def sign_in(device: str) -> dict[str, str]:
        issued = api.post(
            "/auth/token",
            data={
                "username": "phone@example.org",
                "password": "correct horse battery",
                "device_name": device,
            },
        )
        assert issued.status_code == 200, issued.text
        return {"Authorization": f"Bearer {issued.json()['access_token']}"}

    phone, tablet = sign_in("Phone"), sign_in("Tablet")
    lesson = api.get(f"/lessons/{LESSON}", headers={"Accept-Language": "pt-BR"})
    assert lesson.headers["content-language"] == "pt-BR"
    again = api.get(
        f"/lessons/{LESSON}",
        headers={"Accept-Language": "pt-BR", "If-None-Match": lesson.headers["etag"]},
    )
    assert again.status_code == 304
    steps = [step["id"] for step in lesson.json()["steps"]]

    def event(event_id: str, kind: str, step: str, minute: int) -> dict[str, str]:
        return {
            "id": event_id,
            "type": kind,
            "lesson_id": LESSON,
            "step_id": step,
            "at": f"2026-01-01T10:{minute:02d}:00Z",
        }

    offline_phone = [
        event("p1", "step_completed", steps[0], 1),
        event("p2", "position", steps[1], 2),
    ]
    offline_tablet = [
        event("t1", "step_completed", steps[2], 3),
        event("t2", "position", steps[3], 4),
    ]
    first = api.post("/progress/events", headers=phone, json={"events": offline_phone})
    assert first.status_code == 200, first.text
    phone_cursor = first.json()["cursor"]
    tablet_sync = api.post(
        "/progress/events", headers=tablet, json={"events": offline_tablet + offline_phone}
    )  # overlap
    merged = tablet_sync.json()["lessons"][LESSON]
    assert merged["completed_steps"] == sorted([steps[0], steps[2]])
    assert merged["last_step"] == steps[3]
    # The phone retries its batch (lost answer) with its cursor: it gets the tablet's changes.
    retry = api.post(
        "/progress/events", headers=phone, json={"events": offline_phone, "since": phone_cursor}
    ).json()
    assert retry["lessons"][LESSON]["completed_steps"] == merged["completed_steps"]
    assert retry["cursor"] == tablet_sync.json()["cursor"]
    quiet = api.get("/progress", params={"since": retry["cursor"]}, headers=phone).json()
    assert quiet == {"lessons": {}, "cursor": retry["cursor"], "rejected": []}

    assert api.delete("/auth/token", headers=phone).status_code == 204
    refused = api.get("/progress", headers=phone)
    assert refused.status_code == 401 and refused.json()["code"] == "not_authenticated"
    assert api.get("/me", headers=tablet).json()["display_name"] == "Ada"
