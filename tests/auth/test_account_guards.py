"""The rest of an account's life cycle (both databases): a password checked with a token is
limited like a sign-in, and a new password voids every reset link issued before it."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.auth.conftest import Inbox
from tests.auth.factories import PASSWORD, register_and_sign_in

NEW_PASSWORD = "violet kettle sunrise"


def _reset_link_token(client: TestClient, inbox: Inbox, email: str) -> str:
    count = len(inbox.messages)
    assert client.post("/api/v1/auth/password-reset", json={"email": email}).status_code == 202
    mails = inbox.messages
    assert len(mails) == count + 1
    text = mails[-1].get_payload(decode=True).decode()  # type: ignore[union-attr]
    match = re.search(r"reset-password\?token=(\S+)", text)
    assert match, text
    return match.group(1)


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [("POST", "/api/v1/auth/password", "current_password"), ("DELETE", "/api/v1/me", "password")],
)
def test_password_guesses_with_a_token_are_limited_like_sign_in(
    client: TestClient, method: str, path: str, field: str
) -> None:
    """A stolen token used to guess the password: refused with 429 after sign-in's allowance,
    and the right password then does not get through either."""
    auth = register_and_sign_in(client)
    body = {field: "wrong guess 0"}
    if field == "current_password":
        body["new_password"] = NEW_PASSWORD
    codes = []
    for number in range(12):
        body[field] = f"wrong guess {number}"
        codes.append(client.request(method, path, json=body, headers=auth).status_code)
    assert codes == [401] * 9 + [429] * 3  # ten checks of this account from here, sign-in's one

    body[field] = PASSWORD
    right = client.request(method, path, json=body, headers=auth)
    assert right.status_code == 429
    assert int(right.headers["retry-after"]) > 0


def test_a_password_change_voids_every_earlier_reset_link(client: TestClient, inbox: Inbox) -> None:
    auth = register_and_sign_in(client, "twice@example.org")
    earlier = _reset_link_token(client, inbox, "twice@example.org")
    changed = client.post(
        "/api/v1/auth/password",
        json={"current_password": PASSWORD, "new_password": NEW_PASSWORD},
        headers=auth,
    )
    assert changed.status_code == 204
    used = client.post(
        "/api/v1/auth/password-reset/confirm",
        json={"token": earlier, "new_password": "another violet kettle"},
    )
    assert used.status_code == 400 and used.json()["code"] == "reset_token_invalid"


def test_a_reset_voids_the_other_links_issued_before_it(client: TestClient, inbox: Inbox) -> None:
    register_and_sign_in(client, "links@example.org")
    first = _reset_link_token(client, inbox, "links@example.org")
    second = _reset_link_token(client, inbox, "links@example.org")
    done = client.post(
        "/api/v1/auth/password-reset/confirm", json={"token": second, "new_password": NEW_PASSWORD}
    )
    assert done.status_code == 204
    stale = client.post(
        "/api/v1/auth/password-reset/confirm",
        json={"token": first, "new_password": "another violet kettle"},
    )
    assert stale.status_code == 400
