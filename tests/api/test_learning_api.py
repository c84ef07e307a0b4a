"""The learning API as the mobile app uses it: course, lessons with locale and ETag, quiz, sync."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.content import service as content
from tests.auth.factories import register_and_sign_in

LESSON = "ddp-fundamentals"


def _steps() -> list[str]:
    return [step.id for step in content.localized_lesson(LESSON).steps]


def _event(event_id: str, kind: str, at: str, **fields: Any) -> dict[str, Any]:
    return {"id": event_id, "type": kind, "lesson_id": LESSON, "at": at, **fields}


def test_course_lists_lessons_in_order(client: TestClient) -> None:
    response = client.get("/api/v1/courses")
    assert response.status_code == 200
    body = response.json()
    assert LESSON in [lesson["id"] for lesson in body["lessons"]]
    assert response.headers["content-language"] == "en"
    assert response.headers["etag"]


def test_lesson_locale_from_query_or_accept_language(client: TestClient) -> None:
    by_header = client.get(f"/api/v1/lessons/{LESSON}", headers={"Accept-Language": "tr,en;q=0.5"})
    assert by_header.status_code == 200
    assert by_header.headers["content-language"] == "tr"
    assert by_header.json()["locale"] == "tr"
    by_query = client.get(
        f"/api/v1/lessons/{LESSON}?locale=pt-BR", headers={"Accept-Language": "tr"}
    )
    assert by_query.headers["content-language"] == "pt-BR"
    english = client.get(f"/api/v1/lessons/{LESSON}?locale=xx")
    assert english.headers["content-language"] == "en"
    assert english.json()["fallback_fields"] == []
    assert by_header.headers["etag"] != english.headers["etag"]


def test_lesson_carries_no_quiz_answers(client: TestClient) -> None:
    lesson = client.get(f"/api/v1/lessons/{LESSON}").json()
    assert lesson["quiz"] and lesson["steps"] and lesson["exercises"]
    for question in lesson["quiz"]:
        assert {"id", "question", "choices"} <= set(question)
        assert not {"answer", "explanation", "correct"} & set(question)
        for choice in question["choices"]:
            assert not {"correct", "is_correct"} & set(choice)
    assert "starter_code" in lesson["exercises"][0]
    assert "fallback_fields" in lesson


def test_etag_and_304(client: TestClient) -> None:
    first = client.get(f"/api/v1/lessons/{LESSON}?locale=tr")
    etag = first.headers["etag"]
    cached = client.get(f"/api/v1/lessons/{LESSON}?locale=tr", headers={"If-None-Match": etag})
    assert cached.status_code == 304
    assert cached.content == b""
    assert cached.headers["etag"] == etag
    other_locale = client.get(
        f"/api/v1/lessons/{LESSON}?locale=en", headers={"If-None-Match": etag}
    )
    assert other_locale.status_code == 200


def test_unknown_lesson_is_a_json_404(client: TestClient) -> None:
    response = client.get("/api/v1/lessons/no-such-lesson")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_quiz_answer_is_checked_and_saved_for_a_signed_in_learner(client: TestClient) -> None:
    source = content.get_catalog().lessons[LESSON].lesson.quiz[0]
    wrong = next(c.id for c in source.choices if c.id != source.answer)
    anonymous = client.post(f"/api/v1/quiz/{LESSON}/{source.id}", json={"choice": wrong})
    assert anonymous.status_code == 200
    assert anonymous.json()["correct"] is False
    assert anonymous.json()["explanation"]
    assert anonymous.json()["recorded"] is False

    headers = register_and_sign_in(client)
    right = client.post(
        f"/api/v1/quiz/{LESSON}/{source.id}", json={"choice": source.answer}, headers=headers
    )
    assert right.json() == {**right.json(), "correct": True, "recorded": True}
    progress = client.get("/api/v1/progress", headers=headers).json()
    assert progress["lessons"][LESSON]["quiz"]["correct_questions"] == [source.id]
    missing = client.post(f"/api/v1/quiz/{LESSON}/nope", json={"choice": "a"})
    assert missing.status_code == 404


def test_sync_twice_with_a_cursor(client: TestClient) -> None:
    headers = register_and_sign_in(client)
    steps = _steps()
    first = client.post(
        "/api/v1/progress/events",
        headers=headers,
        json={
            "events": [
                _event("ph-1", "step_completed", "2026-01-01T10:00:00Z", step_id=steps[0]),
                _event("ph-2", "position", "2026-01-01T10:01:00Z", step_id=steps[1]),
            ]
        },
    )
    assert first.status_code == 200
    body = first.json()
    assert body["lessons"][LESSON]["completed_steps"] == [steps[0]]
    assert body["lessons"][LESSON]["last_step"] == steps[1]
    cursor = body["cursor"]

    retry = client.post(
        "/api/v1/progress/events",
        headers=headers,
        json={
            "since": cursor,
            "events": [_event("ph-2", "position", "2026-01-01T10:01:00Z", step_id=steps[1])],
        },
    )
    assert retry.json() == {"lessons": {}, "cursor": cursor, "rejected": []}
    assert client.get(f"/api/v1/progress?since={cursor}", headers=headers).json()["lessons"] == {}
    assert LESSON in client.get("/api/v1/progress?since=0", headers=headers).json()["lessons"]


def test_progress_needs_an_account_and_is_private(client: TestClient) -> None:
    assert client.get("/api/v1/progress").status_code == 401
    assert client.post("/api/v1/progress/events", json={"events": []}).status_code == 401
    alice = register_and_sign_in(client)
    bob = register_and_sign_in(client)
    steps = _steps()
    client.post(
        "/api/v1/progress/events",
        headers=alice,
        json={"events": [_event("x1", "step_completed", "2026-01-01T10:00:00Z", step_id=steps[0])]},
    )
    assert client.get("/api/v1/progress", headers=bob).json()["lessons"] == {}
    # Bob reusing Alice's event id stores Bob's own event; Alice's state is untouched.
    client.post(
        "/api/v1/progress/events",
        headers=bob,
        json={"events": [_event("x1", "step_completed", "2026-01-01T10:00:00Z", step_id=steps[2])]},
    )
    alice_state = client.get("/api/v1/progress", headers=alice).json()["lessons"][LESSON]
    assert alice_state["completed_steps"] == [steps[0]]


def test_malformed_events_are_422_with_details(client: TestClient) -> None:
    headers = register_and_sign_in(client)
    response = client.post(
        "/api/v1/progress/events",
        headers=headers,
        json={"events": [{"id": "bad id!", "type": "teleport", "lesson_id": LESSON, "at": "x"}]},
    )
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_request"
    too_many = client.post(
        "/api/v1/progress/events",
        headers=headers,
        json={
            "events": [
                _event(f"e{i}", "step_seen", "2026-01-01T10:00:00Z", step_id="a")
                for i in range(501)
            ]
        },
    )
    assert too_many.status_code == 422


def test_broken_lesson_is_503_and_the_others_still_serve(
    client: TestClient, use_lessons: Any, lessons_copy: Any
) -> None:
    file = lessons_copy / "02-second-lesson" / "lesson.yaml"
    file.write_text(file.read_text("utf-8").replace("steps:", "steps: ["), "utf-8")
    use_lessons(lessons_copy)
    broken = client.get("/api/v1/lessons/second-lesson")
    assert broken.status_code == 503
    assert broken.json()["code"] == "lesson_unavailable"
    assert client.get("/api/v1/lessons/first-steps").status_code == 200
    listed = {
        item["id"]: item["available"] for item in client.get("/api/v1/courses").json()["lessons"]
    }
    assert listed == {**listed, "second-lesson": False, "first-steps": True}
