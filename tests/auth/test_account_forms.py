"""The account pages as a learner meets them: every form through the shared field template,
errors next to the field they are about, a welcome after registering that leads back to where
the learner was, a page that confirms a deletion, and "sign out everywhere"."""

from __future__ import annotations

import re
from html import unescape

from fastapi.testclient import TestClient
from httpx import Response

from tests.auth.factories import PASSWORD, bearer, browser_sign_up, page_csrf_token

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


ACCOUNT_FORMS = {
    "/account/password": ("current_password", "new_password"),
    "/account/delete": ("password",),
    "/forgot-password": ("email",),
    "/reset-password?token=x": ("new_password",),
}


def test_every_account_form_goes_through_the_shared_field_template(client: TestClient) -> None:
    browser_sign_up(client)
    for path, names in ACCOUNT_FORMS.items():
        page = client.get(path)
        assert page.status_code == 200, path
        for name in names:
            field = re.search(
                rf'<div class="field">\s*<label for="{name}">[^<]+</label>\s*<input id="{name}"',
                page.text,
            )
            assert field is not None, (path, name)


def test_a_wrong_password_is_said_at_its_field(client: TestClient) -> None:
    token = browser_sign_up(client)
    wrong = client.post(
        "/account/password",
        data={"csrf_token": token, "current_password": "not it at all", "new_password": "x" * 12},
        headers=ORIGIN,
    )
    assert wrong.status_code == 401
    current = re.search(r'<input id="current_password"[^>]*>', wrong.text)
    assert current is not None and 'aria-describedby="current_password-error"' in current[0]
    assert 'class="form-error"' not in wrong.text


def test_sign_out_everywhere_signs_out_every_device_and_says_so(client: TestClient) -> None:
    email = "everywhere@example.org"
    token = browser_sign_up(client, email)
    issued = client.post("/api/v1/auth/token", data={"username": email, "password": PASSWORD})
    phone = bearer(issued.json()["access_token"])
    assert client.get("/api/v1/me", headers=phone).status_code == 200
    devices = client.get("/account/devices").text
    assert 'action="/account/devices/revoke-all"' in devices
    out = client.post(
        "/account/devices/revoke-all",
        data={"csrf_token": token},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert out.status_code == 303 and out.headers["location"] == "/account/signed-out"
    assert 'data-testid="signed-out-everywhere"' in client.get("/account/signed-out").text
    assert client.get("/api/v1/me", headers=phone).status_code == 401  # the app too
    assert client.get("/account/devices", follow_redirects=False).status_code == 303
