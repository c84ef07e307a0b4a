"""The password policy refuses what an attacker tries first, saying why in the learner's
language: a common password, the site's own words, the account's email, short repeats."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.auth.passwords import common_passwords

EMAIL = "ada.lovelace@example.org"


def _register(client: TestClient, password: str, locale: str = "en") -> tuple[int, dict[str, str]]:
    response = client.post(
        "/api/v1/auth/register",
        json={"email": EMAIL, "password": password, "display_name": "Ada"},
        headers={"Accept-Language": locale},
    )
    return response.status_code, response.json()


@pytest.mark.parametrize(
    ("password", "because"),
    [
        ("rendezvous1", "this site's own words"),
        ("pytorch1234", "this site's own words"),
        ("correcthorse", "too easy to guess"),
        ("qwertyuiop", "too easy to guess"),
        ("abcd1234abcd", "short pattern"),
        ("abcabcabcabc", "short pattern"),
        (EMAIL, "your email address"),
        ("AdaLovelace2024", "your email address"),
    ],
)
def test_guessable_passwords_are_refused_with_the_reason(
    client: TestClient, password: str, because: str
) -> None:
    status, body = _register(client, password)
    assert status == 422
    assert body["code"] == "weak_password"
    assert because in body["message"]


@pytest.mark.parametrize(
    ("locale", "said"),
    [("tr", "sitenin kendi kelimelerinden"), ("pt-BR", "palavras do próprio site")],
)
def test_the_reason_is_said_in_the_learner_s_language(
    client: TestClient, locale: str, said: str
) -> None:
    status, body = _register(client, "rendezvous2024", locale)
    assert status == 422
    assert said in body["message"]


def test_a_new_password_built_from_the_email_is_refused_at_change_too(client: TestClient) -> None:
    assert _register(client, "violet kettle marmalade")[0] == 201
    token = client.post(
        "/api/v1/auth/token",
        data={"username": EMAIL, "password": "violet kettle marmalade"},
    ).json()["access_token"]
    changed = client.post(
        "/api/v1/auth/password",
        json={"current_password": "violet kettle marmalade", "new_password": "lovelace.ada.99"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert changed.status_code == 422
    assert "your email address" in changed.json()["message"]


def test_unrelated_words_are_accepted(client: TestClient) -> None:
    assert _register(client, "amber lantern orchard")[0] == 201


def test_the_shipped_list_holds_at_least_ten_thousand_common_passwords() -> None:
    common = common_passwords()
    assert len(common) >= 10_000
    assert {"password", "123456", "qwerty", "iloveyou"} <= common
