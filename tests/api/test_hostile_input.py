"""Bad input gets a 4xx and loses nothing; every error is `{code, message}` (both databases)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.models import DeviceToken, User
from app.db import get_session
from app.learning.models import ProgressEvent
from tests.auth.factories import (
    PASSWORD,
    bearer,
    browser_sign_up,
    page_csrf_token,
    register_and_sign_in,
)

LESSON = "ddp-fundamentals"
STEP = "meet-ddp"


def _event(event_id: str, at: str) -> dict[str, object]:
    return {"id": event_id, "type": "position", "lesson_id": LESSON, "step_id": STEP, "at": at}


@pytest.mark.parametrize("odd", ["0999-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00"])
def test_an_odd_timestamp_is_rejected_and_the_good_events_are_stored(
    client: TestClient, session: Session, odd: str
) -> None:
    auth = register_and_sign_in(client)
    batch = {"events": [_event("bad", odd), _event("good", "2026-01-01T10:00:00Z")]}
    for _ in range(2):  # a retry of the same batch answers the same
        response = client.post("/api/v1/progress/events", json=batch, headers=auth)
        assert response.status_code == 200, response.text
        body = response.json()
        assert [(r["id"], r["code"]) for r in body["rejected"]] == [("bad", "invalid_time")]
        assert body["lessons"][LESSON]["last_step"] == STEP
    stored = session.scalars(select(ProgressEvent.client_id)).all()
    assert "good" in stored and "bad" not in stored


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("register", "display_name"),
        ("register", "email"),
        ("register", "password"),
    ],
)
@pytest.mark.parametrize("bad", ["\x00", "\ud800"])
def test_nul_and_lone_surrogates_are_refused_at_registration(
    client: TestClient, path: str, field: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    payload = {"email": "nul@example.org", "password": PASSWORD, "display_name": "Ada"}
    payload[field] = payload[field].replace("@", f"{bad}@") if field == "email" else bad + "x" * 12
    body = json.dumps(payload)  # json escapes the surrogate as \ud800, as a hostile client would
    with caplog.at_level(logging.DEBUG):
        response = client.post(
            f"/api/v1/auth/{path}", content=body, headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid_request"
    assert "$argon2" not in caplog.text


@pytest.mark.parametrize("bad", ["\x00", "\ud800"])
def test_nul_and_lone_surrogates_are_refused_in_device_names_and_drafts(
    client: TestClient, bad: str
) -> None:
    auth = register_and_sign_in(client)
    draft = client.put(
        "/api/v1/drafts/ddp-fundamentals/train",
        content=json.dumps({"code": f"print(1){bad}\n"}),
        headers={**auth, "Content-Type": "application/json"},
    )
    assert draft.status_code == 422, draft.text
    submitted = client.post(
        "/api/v1/submissions",
        content=json.dumps({"exercise": "ddp-fundamentals/train", "code": f"x = 1{bad}\n"}),
        headers={**auth, "Content-Type": "application/json"},
    )
    assert submitted.status_code == 422, submitted.text


@pytest.mark.parametrize("bad", ["%00", "%ED%A0%80"])  # NUL; a surrogate's bytes (not UTF-8)
def test_device_names_are_refused_or_cleaned_never_a_500(
    client: TestClient, session: Session, bad: str
) -> None:
    register_and_sign_in(client, "dev@example.org")
    form = f"username=dev%40example.org&password={quote(PASSWORD)}&device_name=P{bad}"
    token = client.post(
        "/api/v1/auth/token",
        content=form,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    if bad == "%00":
        assert token.status_code == 422, token.text
    else:  # undecodable bytes arrive as U+FFFD, which is storable text
        assert token.status_code == 200, token.text
        names = session.scalars(select(DeviceToken.name)).all()
        assert "P\ufffd\ufffd\ufffd" in names


def test_a_body_over_the_limit_is_refused_with_413(client: TestClient) -> None:
    huge = b'{"email": "' + b"a" * (2 * 1024 * 1024) + b'"}'
    response = client.post(
        "/api/v1/auth/register", content=huge, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["code"] == "too_large"


def test_a_body_without_a_length_is_refused_before_it_is_read_whole(app: FastAPI) -> None:
    """A chunked body (no Content-Length) past the cap: 413 while reading, the rest unread."""
    chunk, chunks = 64 * 1024, 64  # 4 MiB offered against the 1 MiB cap
    pulled = 0
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"a" * chunk, "more_body": pulled < chunks}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/auth/register",
        "raw_path": b"/api/v1/auth/register",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"host", b"testserver")],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
        "state": {},
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 413
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")  # type: ignore[misc]
    assert json.loads(body)["code"] == "too_large"
    assert pulled * chunk <= 1024 * 1024 + chunk  # read no further than the cap


def test_a_score_above_the_maximum_is_rejected(client: TestClient, session: Session) -> None:
    auth = register_and_sign_in(client)
    event = {
        "id": "q1",
        "type": "quiz_completed",
        "lesson_id": LESSON,
        "at": "2026-01-01T10:00:00Z",
        "score": 9,
        "max_score": 3,
    }
    good = _event("good", "2026-01-01T10:00:00Z")
    response = client.post("/api/v1/progress/events", json={"events": [event, good]}, headers=auth)
    assert response.status_code == 200
    assert [(r["id"], r["code"]) for r in response.json()["rejected"]] == [("q1", "invalid_score")]
    assert session.scalars(select(ProgressEvent.client_id)).all() == ["good"]


def test_an_unexpected_error_is_json_on_the_api_and_a_page_for_pages(
    app: FastAPI, client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    auth = register_and_sign_in(client)
    browser_sign_up(client)

    def broken() -> Iterator[Session]:
        raise RuntimeError("the database fell over")
        yield  # pragma: no cover - a generator dependency, like the real one

    app.dependency_overrides[get_session] = broken
    with caplog.at_level(logging.ERROR):
        api = client.get("/api/v1/me", headers=auth)
        page = client.get("/account/devices", headers={"Accept": "text/html"})
    assert api.status_code == 500
    assert api.json()["code"] == "internal_error"
    assert api.headers["content-type"].startswith("application/json")
    assert page.status_code == 500
    assert page.headers["content-type"].startswith("text/html")
    assert "the database fell over" in caplog.text  # logged for us, not shown to the learner
    assert "the database fell over" not in api.text + page.text


def test_the_user_table_holds_no_row_after_a_refused_registration(
    client: TestClient, session: Session
) -> None:
    client.post(
        "/api/v1/auth/register",
        json={"email": "n@example.org", "password": PASSWORD, "display_name": "A\x00"},
    )
    assert session.scalar(select(func.count()).select_from(User)) == 0
    assert client.get("/api/v1/me", headers=bearer("rdv_nothing")).status_code == 401


def test_a_nul_in_the_sign_up_form_gets_a_page_not_a_500(client: TestClient) -> None:
    token = page_csrf_token(client.get("/register").text)
    response = client.post(
        "/register",
        data={
            "email": "form@example.org",
            "display_name": "A\x00",
            "password": PASSWORD,
            "csrf_token": token,
        },
        headers={"Origin": "http://testserver", "Accept": "text/html"},
    )
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("text/html")


def test_a_query_parameter_given_twice_is_refused_not_read_as_its_last_value(
    client: TestClient,
) -> None:
    """Schemathesis found `GET /api/v1/coach/history?lesson_id=x&lesson_id=y` answered 200."""
    auth = register_and_sign_in(client)
    one = client.get("/api/v1/coach/history?lesson_id=ddp-fundamentals", headers=auth)
    assert one.status_code == 200, one.text
    for path in (
        "/api/v1/coach/history?lesson_id=a&lesson_id=b",
        "/api/v1/submissions?limit=5&limit=6",
        "/api/v1/content/schema/lesson?locale=en&locale=tr",
    ):
        response = client.get(path, headers=auth)
        assert response.status_code == 422, (path, response.text)
        body = response.json()
        assert body["code"] == "invalid_request" and "given more than once" in body["message"]


# Issue 39, D9: what the probe's fuzzing found answered 500.


@pytest.mark.parametrize("depth", [65, 990, 100_000])
def test_json_nested_too_deep_is_refused_before_it_is_parsed(
    client: TestClient, depth: int
) -> None:
    """Anonymous, on any JSON route: the parser's RecursionError was a 500 (about 990 deep)."""
    body = '{"email": ' + "[" * depth + "]" * depth + "}"
    for path in ("/api/v1/auth/register", "/api/v1/auth/password-reset"):
        answer = client.post(path, content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 422, (path, answer.text)
        assert answer.json()["code"] == "invalid_request"


def test_json_as_deep_as_a_real_request_is_read_as_before(client: TestClient) -> None:
    body = {"email": "deep@example.org", "password": PASSWORD, "display_name": "D", "x": [[[1]]]}
    assert client.post("/api/v1/auth/register", json=body).status_code == 201


@pytest.mark.parametrize(
    "moment", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59"]
)
def test_a_crafted_submissions_cursor_is_refused(client: TestClient, moment: str) -> None:
    import base64
    import uuid

    auth = register_and_sign_in(client, "cursor@example.org")
    raw = f"{moment}|{uuid.uuid4().hex}".encode()
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    answer = client.get("/api/v1/submissions", params={"cursor": cursor}, headers=auth)
    assert answer.status_code in (200, 422), answer.text  # never a 500
    if moment.endswith(("-14:00", "+14:00")):
        assert answer.status_code == 422


def test_analytics_until_the_calendar_s_last_day_is_answered(
    client: TestClient, session: Session
) -> None:
    from app.auth import service as auth_service
    from app.auth.models import INSTRUCTOR
    from tests.auth.factories import create_token, create_user

    user = create_user(session, email="calendar@example.org")
    auth_service.set_role(session, email=user.email, role=INSTRUCTOR)
    auth = bearer(create_token(session, user))
    for path in ("/api/v1/instructor/analytics", "/api/v1/instructor/analytics/steps.csv"):
        answer = client.get(
            path, params={"until": "9999-12-31", "since": "0001-01-01"}, headers=auth
        )
        assert answer.status_code == 200, (path, answer.text)


def test_a_row_deleted_under_a_request_is_409_not_500(session: Session) -> None:
    """Issue 39, D9: a sync in flight while the account is deleted updated a device row that was
    gone (StaleDataError: 500). Whatever raises it, the answer is 409 `changed_meanwhile`."""
    from sqlalchemy.orm.exc import StaleDataError

    from app.main import create_app

    application = create_app()

    @application.get("/api/v1/stale-for-the-test")
    def stale() -> None:
        raise StaleDataError("UPDATE device_tokens: 1 row expected, 0 were matched")

    with TestClient(application) as stale_client:
        answer = stale_client.get("/api/v1/stale-for-the-test")
    assert answer.status_code == 409
    assert answer.json()["code"] == "changed_meanwhile"
