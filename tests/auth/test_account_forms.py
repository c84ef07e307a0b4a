"""The account pages as a learner meets them: errors next to the field they are about, and a
welcome after registering that leads back to where the learner was."""

from __future__ import annotations

import re
from html import unescape

from fastapi.testclient import TestClient
from httpx import Response

from tests.auth.factories import PASSWORD, page_csrf_token

ORIGIN = {"Origin": "http://testserver"}


def _register(client: TestClient, **fields: str) -> Response:
    token = page_csrf_token(client.get("/register").text)
    return client.post(
        "/register",
        data={"csrf_token": token, "display_name": "Ada", "password": PASSWORD, **fields},
        headers=ORIGIN,
        follow_redirects=False,
    )


def _hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, f"no hidden field {name}"
    return unescape(found.group(1))


def test_a_short_password_is_said_at_the_password_field(client: TestClient) -> None:
    page = _register(client, email="short@example.org", password="short")
    assert page.status_code == 422
    password = re.search(r'<input id="password"[^>]*>', page.text)
    assert password is not None
    assert 'aria-describedby="password-error password-help"' in password[0]


def test_registering_welcomes_and_returns_to_the_lesson(client: TestClient) -> None:
    """Registering signs nobody in (the answer must not say whether the address was new): the
    sign-in page says to check the mail, and signing in leads to the lesson with a welcome."""
    target = "/lessons/ddp-fundamentals?step=3"
    answer = _register(client, email="new@example.org", next=target)
    assert "rdv_session" not in client.cookies
    sign_in_page = client.get(answer.headers["location"])
    assert 'data-testid="registered"' in sign_in_page.text
    signed_in = client.post(
        "/login",
        data={
            "csrf_token": page_csrf_token(sign_in_page.text),
            "email": "new@example.org",
            "password": PASSWORD,
            "next": _hidden(sign_in_page.text, "next"),
        },
        headers=ORIGIN,
        follow_redirects=False,
    )
    location = signed_in.headers["location"]
    assert location == "/lessons/ddp-fundamentals?step=3&welcome=1"
    lesson = client.get(location)
    assert "Welcome, Ada: your account is ready." in lesson.text
    assert 'href="/lessons/ddp-fundamentals">continue</a>' in lesson.text
    assert "Welcome, Ada" not in client.get("/lessons/ddp-fundamentals?step=3").text
