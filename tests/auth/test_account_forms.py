"""The account pages as a learner meets them: errors next to the field they are about, and a
welcome after registering that leads back to where the learner was."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from httpx import Response

from tests.auth.factories import PASSWORD, page_csrf_token, register_and_sign_in

ORIGIN = {"Origin": "http://testserver"}


def _register(client: TestClient, **fields: str) -> Response:
    token = page_csrf_token(client.get("/register").text)
    return client.post(
        "/register",
        data={"csrf_token": token, "display_name": "Ada", "password": PASSWORD, **fields},
        headers=ORIGIN,
        follow_redirects=False,
    )


def test_a_taken_email_is_said_at_the_email_field(client: TestClient) -> None:
    register_and_sign_in(client, "taken@example.org")
    client.cookies.clear()
    page = _register(client, email="taken@example.org")
    assert page.status_code == 409
    html = page.text
    assert re.search(r'<p class="field-error" id="email-error" role="alert">[^<]*exists', html)
    email = re.search(r'<input id="email"[^>]*>', html)
    assert email is not None
    assert 'aria-invalid="true"' in email[0] and 'aria-describedby="email-error"' in email[0]
    password = re.search(r'<input id="password"[^>]*>', html)
    assert password is not None and "aria-invalid" not in password[0]
    assert "form-error" not in html  # said once, where it belongs


def test_a_short_password_is_said_at_the_password_field(client: TestClient) -> None:
    page = _register(client, email="short@example.org", password="short")
    assert page.status_code == 422
    password = re.search(r'<input id="password"[^>]*>', page.text)
    assert password is not None
    assert 'aria-describedby="password-error password-help"' in password[0]


def test_registering_welcomes_and_returns_to_the_lesson(client: TestClient) -> None:
    target = "/lessons/ddp-fundamentals?step=3"
    answer = _register(client, email="new@example.org", next=target)
    location = answer.headers["location"]
    assert location == "/lessons/ddp-fundamentals?step=3&welcome=1"
    lesson = client.get(location)
    assert "Welcome, Ada: your account is ready." in lesson.text
    assert 'href="/lessons/ddp-fundamentals">continue</a>' in lesson.text
    assert "Welcome, Ada" not in client.get("/lessons/ddp-fundamentals?step=3").text
