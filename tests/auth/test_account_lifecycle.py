"""Change password, delete the account, reset a forgotten password by email (both databases).

The reset mail goes through a real SMTP server (aiosmtpd) that the test starts on loopback.
"""

from __future__ import annotations

import re
import uuid
from email.header import decode_header, make_header

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.analytics import consumer
from app.db import Base, import_all_models
from tests.auth.conftest import Inbox
from tests.auth.factories import (
    PASSWORD,
    bearer,
    browser_sign_up,
    page_csrf_token,
    register_and_sign_in,
)

NEW_PASSWORD = "violet kettle sunrise"


def _token(client: TestClient, email: str, password: str) -> str | None:
    response = client.post("/api/v1/auth/token", data={"username": email, "password": password})
    return response.json()["access_token"] if response.status_code == 200 else None


def test_changing_the_password_signs_the_other_devices_out(client: TestClient) -> None:
    phone = register_and_sign_in(client, "change@example.org")
    laptop = bearer(_token(client, "change@example.org", PASSWORD) or "")
    wrong = client.post(
        "/api/v1/auth/password",
        json={"current_password": "not it at all", "new_password": NEW_PASSWORD},
        headers=phone,
    )
    assert wrong.status_code == 401 and wrong.json()["code"] == "invalid_credentials"
    weak = client.post(
        "/api/v1/auth/password",
        json={"current_password": PASSWORD, "new_password": "password12"},
        headers=phone,
    )
    assert weak.status_code == 422 and weak.json()["code"] == "weak_password"
    changed = client.post(
        "/api/v1/auth/password",
        json={"current_password": PASSWORD, "new_password": NEW_PASSWORD},
        headers=phone,
    )
    assert changed.status_code == 204
    assert client.get("/api/v1/me", headers=phone).status_code == 200
    assert client.get("/api/v1/me", headers=laptop).status_code == 401
    assert _token(client, "change@example.org", PASSWORD) is None
    assert _token(client, "change@example.org", NEW_PASSWORD) is not None


def _rows_of(session: Session, user_id: object) -> dict[str, int]:
    """Rows in every table with a `user_id` column (any per-learner table, now or later)."""
    import_all_models()
    counts = {}
    for table in Base.metadata.sorted_tables:
        if "user_id" in table.c:
            counts[table.name] = session.scalar(
                select(func.count()).select_from(table).where(table.c.user_id == user_id)
            )
    return counts


def test_deleting_the_account_removes_everything_personal(
    client: TestClient, session: Session
) -> None:
    auth = register_and_sign_in(client, "leaving@example.org")
    user_id = client.get("/api/v1/me", headers=auth).json()["id"]
    event = {
        "id": "e1",
        "type": "position",
        "lesson_id": "ddp-fundamentals",
        "step_id": "meet-ddp",
        "at": "2026-01-01T10:00:00Z",
    }
    assert client.post("/api/v1/progress/events", json={"events": [event]}, headers=auth).is_success
    code = {"code": "print('hello')\n"}
    assert client.put("/api/v1/drafts/ddp-fundamentals/train", json=code, headers=auth).is_success
    submitted = client.post(
        "/api/v1/submissions", json={"exercise": "ddp-fundamentals/train", **code}, headers=auth
    )
    assert submitted.status_code == 202
    before = _rows_of(session, uuid.UUID(user_id))
    assert sum(before.values()) >= 5 and before["submissions"] == 1

    refused = client.request("DELETE", "/api/v1/me", json={"password": "wrong one!"}, headers=auth)
    assert refused.status_code == 401
    deleted = client.request("DELETE", "/api/v1/me", json={"password": PASSWORD}, headers=auth)
    assert deleted.status_code == 204
    # The instructors' rollups of the learner go when the analytics consumer applies the
    # deletion's domain event, seconds after the commit: what it does, done here at once.
    consumer.drain(session)
    after = _rows_of(session, uuid.UUID(user_id))
    assert set(after.values()) == {0}, after
    assert client.get("/api/v1/me", headers=auth).status_code == 401
    assert _token(client, "leaving@example.org", PASSWORD) is None


def test_a_forgotten_password_is_reset_through_the_mailed_link(
    client: TestClient, inbox: Inbox
) -> None:
    phone = register_and_sign_in(client, "forgot@example.org")
    inbox.messages.clear()  # the welcome mail
    unknown = client.post("/api/v1/auth/password-reset", json={"email": "nobody@example.org"})
    known = client.post("/api/v1/auth/password-reset", json={"email": "Forgot@Example.org"})
    assert unknown.status_code == known.status_code == 202
    assert len(inbox.messages) == 1
    mail = inbox.messages[0]
    assert mail["To"] == "forgot@example.org"
    text = mail.get_payload(decode=True).decode()  # type: ignore[union-attr]
    match = re.search(r"http://rdv\.example/reset-password\?token=(\S+)", text)
    assert match, text
    token = match.group(1)

    weak = client.post(
        "/api/v1/auth/password-reset/confirm", json={"token": token, "new_password": "aaaaaaaaaa"}
    )
    assert weak.status_code == 422
    done = client.post(
        "/api/v1/auth/password-reset/confirm", json={"token": token, "new_password": NEW_PASSWORD}
    )
    assert done.status_code == 204
    assert client.get("/api/v1/me", headers=phone).status_code == 401  # every device signed out
    assert _token(client, "forgot@example.org", NEW_PASSWORD) is not None
    again = client.post(
        "/api/v1/auth/password-reset/confirm", json={"token": token, "new_password": NEW_PASSWORD}
    )
    assert again.status_code == 400 and again.json()["code"] == "reset_token_invalid"


def test_the_account_pages_change_reset_and_delete(client: TestClient, inbox: Inbox) -> None:
    browser_sign_up(client, "pages@example.org")
    html = {"Origin": "http://testserver", "Accept": "text/html"}
    token = page_csrf_token(client.get("/account/password").text)
    changed = client.post(
        "/account/password",
        data={"csrf_token": token, "current_password": PASSWORD, "new_password": NEW_PASSWORD},
        headers=html,
    )
    assert 'data-testid="password-changed"' in changed.text

    client.cookies.set("rdv_locale", "tr")
    forgot = client.post(
        "/forgot-password",
        data={"csrf_token": token, "email": "pages@example.org"},
        headers=html,
    )
    assert 'data-testid="reset-sent"' in forgot.text and forgot.headers["content-language"] == "tr"
    text = inbox.messages[-1].get_payload(decode=True).decode()  # type: ignore[union-attr]
    reset_token = re.search(r"token=(\S+)", text).group(1)  # type: ignore[union-attr]
    page = client.get(f"/reset-password?token={reset_token}")
    assert reset_token in page.text
    reset = client.post(
        "/reset-password",
        data={"csrf_token": token, "token": reset_token, "new_password": "amber lantern orchard"},
        headers=html,
    )
    assert 'data-testid="password-reset"' in reset.text
    assert client.get("/api/v1/me").status_code == 401  # the reset signed every device out

    client.cookies.clear()
    token = page_csrf_token(client.get("/login").text)
    client.post(
        "/login",
        data={
            "email": "pages@example.org",
            "password": "amber lantern orchard",
            "csrf_token": token,
        },
        headers=html,
    )
    wrong = client.post(
        "/account/delete", data={"csrf_token": token, "password": "not it at all"}, headers=html
    )
    assert wrong.status_code == 401 and 'id="password-error"' in wrong.text
    gone = client.post(
        "/account/delete",
        data={"csrf_token": token, "password": "amber lantern orchard"},
        headers=html,
        follow_redirects=False,
    )
    assert gone.status_code == 303 and gone.headers["location"] == "/account/deleted"
    assert 'data-testid="account-deleted"' in client.get("/account/deleted").text
    assert _token(client, "pages@example.org", "amber lantern orchard") is None


def test_the_reset_mail_is_in_the_language_of_the_request(client: TestClient, inbox: Inbox) -> None:
    register_and_sign_in(client, "unutkan@example.org")
    inbox.messages.clear()  # the welcome mail
    asked = client.post(
        "/api/v1/auth/password-reset",
        json={"email": "unutkan@example.org"},
        headers={"Accept-Language": "tr"},
    )
    assert asked.status_code == 202
    mail = inbox.messages[0]
    text = mail.get_payload(decode=True).decode()  # type: ignore[union-attr]
    subject = str(make_header(decode_header(str(mail["Subject"]))))
    assert subject == "Rendezvous parolanızı sıfırlayın"
    assert "Yeni bir parola seçmek için" in text
    assert re.search(r"http://rdv\.example/reset-password\?token=\S+", text)
