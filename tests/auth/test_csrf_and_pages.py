"""Browser flows: forms with CSRF tokens, the session cookie, my devices, sign out."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.auth.factories import PASSWORD, browser_sign_up, page_csrf_token, register_and_sign_in

ORIGIN = {"Origin": "http://testserver"}


def _event(event_id: str) -> dict[str, object]:
    return {
        "id": event_id,
        "type": "position",
        "lesson_id": "ddp-fundamentals",
        "step_id": "meet-ddp",
        "at": "2026-01-01T10:00:00Z",
    }


def test_session_cookie_is_httponly_and_samesite(client: TestClient) -> None:
    browser_sign_up(client, "c@example.org")
    client.cookies.delete("rdv_session")
    token = page_csrf_token(client.get("/login").text)
    response = client.post(
        "/login",
        data={"email": "c@example.org", "password": PASSWORD, "csrf_token": token},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.status_code == 303
    cookie = next(
        v for v in response.headers.get_list("set-cookie") if v.startswith("rdv_session=")
    )
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert client.get("/api/v1/me").json()["email"] == "c@example.org"


def test_forms_without_a_token_are_refused(client: TestClient) -> None:
    client.get("/login")  # the browser now holds the CSRF cookie
    missing = client.post(
        "/login", data={"email": "x@example.org", "password": PASSWORD}, headers=ORIGIN
    )
    assert missing.status_code == 403
    forged = client.post(
        "/login",
        data={"email": "x@example.org", "password": PASSWORD, "csrf_token": "0" * 64},
        headers=ORIGIN,
    )
    assert forged.status_code == 403


def test_cross_site_form_is_refused_even_with_a_valid_token(client: TestClient) -> None:
    token = page_csrf_token(client.get("/login").text)
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        response = client.post(
            "/login",
            data={"email": "x@example.org", "password": "p", "csrf_token": token},
            headers=headers,
        )
        assert response.status_code == 403, headers


def test_cookie_authenticated_api_writes_need_the_csrf_header(client: TestClient) -> None:
    token = browser_sign_up(client)
    body = {"events": [_event("web-1")]}
    without = client.post("/api/v1/progress/events", json=body, headers=ORIGIN)
    assert without.status_code == 403
    assert without.json()["code"] == "csrf_failed"
    cross = client.post(
        "/api/v1/progress/events",
        json=body,
        headers={"X-CSRF-Token": token, "Sec-Fetch-Site": "cross-site"},
    )
    assert cross.status_code == 403
    ok = client.post(
        "/api/v1/progress/events",
        json=body,
        headers={"X-CSRF-Token": token, "Sec-Fetch-Site": "same-origin"},
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["lessons"]["ddp-fundamentals"]["last_step"] == "meet-ddp"
    # Reads need no token.
    assert client.get("/api/v1/progress").status_code == 200


def test_bearer_requests_are_exempt_from_csrf(client: TestClient) -> None:
    headers = register_and_sign_in(client)
    client.cookies.clear()
    response = client.post(
        "/api/v1/progress/events",
        json={"events": [_event("app-1")]},
        headers={**headers, "Origin": "https://elsewhere.example"},
    )
    assert response.status_code == 200


def test_login_logout_and_my_devices(client: TestClient) -> None:
    register_and_sign_in(client, "web@example.org")  # one API device
    client.cookies.clear()
    token = page_csrf_token(client.get("/login?next=/account/devices").text)
    signed_in = client.post(
        "/login",
        data={
            "email": "web@example.org",
            "password": PASSWORD,
            "csrf_token": token,
            "next": "/account/devices",
        },
        headers={**ORIGIN, "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0"},
        follow_redirects=False,
    )
    assert signed_in.status_code == 303
    assert signed_in.headers["location"] == "/account/devices"
    page = client.get("/account/devices")
    assert page.status_code == 200
    # Named by browser, version and system (issue 38: every device read "Chrome on Linux").
    assert "Firefox 130 · Linux" in page.text and "Mobile app" in page.text
    token = page_csrf_token(page.text)

    out = client.post("/logout", data={"csrf_token": token}, headers=ORIGIN, follow_redirects=False)
    assert out.status_code == 303
    assert client.get("/api/v1/me").status_code == 401
    after = client.get("/account/devices", follow_redirects=False)
    assert after.status_code == 303 and after.headers["location"].startswith("/login")


def test_wrong_password_form_says_so_and_next_cannot_leave_the_site(client: TestClient) -> None:
    register_and_sign_in(client, "form@example.org")
    token = page_csrf_token(client.get("/login").text)
    wrong = client.post(
        "/login",
        data={"email": "form@example.org", "password": "nope-nope-nope", "csrf_token": token},
        headers=ORIGIN,
    )
    assert wrong.status_code == 401
    assert "email or password is wrong" in wrong.text
    ok = client.post(
        "/login",
        data={
            "email": "form@example.org",
            "password": PASSWORD,
            "csrf_token": token,
            "next": "//evil.example/",
        },
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert ok.headers["location"] == "/"


def test_revoking_a_device_from_the_page(client: TestClient) -> None:
    api_headers = register_and_sign_in(client, "page-revoke@example.org")
    client.cookies.clear()
    token = page_csrf_token(client.get("/login").text)
    client.post(
        "/login",
        data={"email": "page-revoke@example.org", "password": PASSWORD, "csrf_token": token},
        headers=ORIGIN,
    )
    devices = client.get("/api/v1/auth/devices").json()
    phone = next(d for d in devices if d["kind"] == "api")
    response = client.post(
        f"/account/devices/{phone['id']}/revoke",
        data={"csrf_token": token},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert client.get("/api/v1/me", headers=api_headers).status_code == 401
    assert client.get("/api/v1/me").status_code == 200  # the browser itself stays signed in


def test_page_errors_are_translated(client: TestClient) -> None:
    client.cookies.set("rdv_locale", "tr")
    token = page_csrf_token(client.get("/login").text)
    wrong = client.post(
        "/login",
        data={"email": "nobody@example.org", "password": "x" * 12, "csrf_token": token},
        headers=ORIGIN,
    )
    assert wrong.status_code == 401
    assert "E-posta ya da parola yanlış" in wrong.text
    assert wrong.headers["content-language"] == "tr"


def test_header_shows_the_account(client: TestClient) -> None:
    anonymous = client.get("/lessons/ddp-fundamentals").text
    assert 'href="/login?next=' in anonymous and 'action="/logout"' not in anonymous
    browser_sign_up(client)
    signed_in = client.get("/lessons/ddp-fundamentals").text
    assert ">Linus</a>" in signed_in  # the display name links to my devices
    assert 'action="/logout"' in signed_in


class TestExpiredFormPage:
    """A page form that fails its CSRF check gets a page a person can act on (403 kept); API
    clients keep the JSON body."""

    def test_login_without_a_token_gets_a_page_with_a_link_back(self, client: TestClient) -> None:
        client.get("/login?next=/account/devices")
        refused = client.post(
            "/login",
            data={"email": "x@example.org", "password": PASSWORD},
            headers={
                **ORIGIN,
                "Accept": "text/html,application/xhtml+xml,*/*;q=0.8",
                "Referer": "http://testserver/login?next=/account/devices",
            },
        )
        assert refused.status_code == 403
        assert refused.headers["content-type"].startswith("text/html")
        assert 'data-testid="form-expired"' in refused.text
        assert "This form has expired" in refused.text
        assert 'href="/login?next=/account/devices"' in refused.text
        assert '<meta name="csrf-token"' in refused.text  # the base layout

    def test_the_page_is_in_the_learner_s_language(self, client: TestClient) -> None:
        client.get("/register")
        client.cookies.set("rdv_locale", "tr")
        refused = client.post(
            "/register",
            data={"email": "x@example.org", "display_name": "X", "password": PASSWORD},
            headers={**ORIGIN, "Accept": "text/html"},
        )
        assert refused.status_code == 403
        assert refused.headers["content-language"] == "tr"
        assert "Bu formun süresi doldu" in refused.text
        assert 'href="/register"' in refused.text  # no Referer: the form's own page
        client.cookies.set("rdv_locale", "pt-BR")
        refused = client.post("/logout", headers={**ORIGIN, "Accept": "text/html"})
        assert refused.status_code == 403
        assert "Este formulário expirou" in refused.text and ">Voltar à página<" in refused.text
        assert 'href="/"' in refused.text

    def test_a_referer_from_another_site_is_not_followed(self, client: TestClient) -> None:
        client.get("/login")
        for referer in ("https://evil.example/login", "http://testserver//evil.example/x", "x"):
            refused = client.post(
                "/login",
                data={"email": "x@example.org", "password": PASSWORD, "csrf_token": "0" * 64},
                headers={**ORIGIN, "Accept": "text/html", "Referer": referer},
            )
            assert refused.status_code == 403
            assert "evil" not in refused.text, referer
            assert re.search(r'class="button" href="(/login|/)"', refused.text), referer

    def test_a_cross_site_form_gets_the_page_too(self, client: TestClient) -> None:
        token = page_csrf_token(client.get("/login").text)
        refused = client.post(
            "/login",
            data={"email": "x@example.org", "password": PASSWORD, "csrf_token": token},
            headers={"Sec-Fetch-Site": "cross-site", "Accept": "text/html"},
        )
        assert refused.status_code == 403
        assert 'data-testid="form-expired"' in refused.text

    def test_api_clients_keep_the_json_error(self, client: TestClient) -> None:
        browser_sign_up(client)
        body = {"events": [_event("web-json")]}
        for accept in ("text/html", "application/json", "*/*"):
            refused = client.post(
                "/api/v1/progress/events", json=body, headers={**ORIGIN, "Accept": accept}
            )
            assert refused.status_code == 403
            assert refused.json()["code"] == "csrf_failed"
            assert refused.json()["message"]
        # A script that asks a page route for JSON gets JSON.
        refused = client.post(
            "/login",
            data={"email": "x@example.org", "password": PASSWORD},
            headers={**ORIGIN, "Accept": "application/json"},
        )
        assert refused.status_code == 403
        assert refused.json()["code"] == "csrf_failed"
