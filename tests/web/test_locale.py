"""Locale negotiation, one precedence for every path: ?locale=, then the chooser's cookie, then
Accept-Language, then English."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.i18n import (
    SUPPORTED_LOCALES,
    negotiate,
    normalize_locale,
    parse_accept_language,
    translate,
)

# Languages the site does not speak, computed, so that adding one (docs/translating.md's
# example is German) never turns this test red.
UNSUPPORTED = [
    code for code in ("de", "fr", "ja", "zh", "ko", "sw", "fi") if code not in SUPPORTED_LOCALES
][:3]
FIRST, SECOND, THIRD = UNSUPPORTED


@pytest.mark.parametrize(
    ("cookie", "query", "accept", "expected"),
    [
        ("tr", "pt-BR", "tr", "pt-BR"),  # ?locale= wins over everything
        ("tr", None, "pt-BR", "tr"),  # then the cookie
        (None, "pt-BR", "tr", "pt-BR"),
        (None, None, "tr-TR,tr;q=0.9,en;q=0.8", "tr"),  # then Accept-Language
        (None, None, f"{FIRST}-XX, pt;q=0.8, en;q=0.5", "pt-BR"),  # skips what we do not have
        (None, None, "en;q=0.2, tr;q=0.9", "tr"),  # by q-value, not by order
        (None, None, f"{SECOND}, {FIRST}", "en"),  # nothing usable: English
        (None, None, None, "en"),
        ("xx", "yy", "tr", "tr"),  # unknown values are ignored, not fatal
        ("", "pt_br", None, "pt-BR"),
    ],
)
def test_negotiate(cookie: str | None, query: str | None, accept: str | None, expected: str):
    assert negotiate(query=query, cookie=cookie, accept_language=accept) == expected


def test_accept_language_parsing() -> None:
    assert parse_accept_language("tr;q=0, en-US;q=0.7, pt-BR, *;q=0.1, x;q=bad") == [
        "pt-BR",
        "en-US",
    ]
    assert normalize_locale("PT-br") == "pt-BR"
    assert normalize_locale(THIRD) is None


def test_interface_strings_are_translated() -> None:
    assert translate("tr", "Quick check") == "Hızlı kontrol"
    assert translate("pt-BR", "Step %(current)s of %(total)s") == "Passo %(current)s de %(total)s"
    assert translate("en", "Quick check") == "Quick check"


def test_pages_follow_the_precedence(client: TestClient) -> None:
    def served(**kwargs: object) -> str:
        response = client.get("/", **kwargs)
        assert response.status_code == 200
        language = response.headers["content-language"]
        assert f'<html lang="{language}">' in response.text
        return language

    client.cookies.clear()
    assert served() == "en"
    assert served(headers={"Accept-Language": "tr-TR,tr;q=0.9"}) == "tr"
    assert served(params={"locale": "pt-BR"}, headers={"Accept-Language": "tr"}) == "pt-BR"
    client.cookies.set("rdv_locale", "tr")
    assert served(headers={"Accept-Language": "pt-BR"}) == "tr"
    assert served(params={"locale": "pt-BR"}, headers={"Accept-Language": "tr"}) == "pt-BR"


def test_negotiate_takes_keywords_only() -> None:
    with pytest.raises(TypeError):
        negotiate("tr", "pt-BR", None)  # type: ignore[misc]


def test_chooser_drops_the_pages_locale_query(client: TestClient) -> None:
    """?locale= wins over the cookie, so the chooser returns to the page without it."""
    response = client.get(
        "/locale/tr", params={"next": "/lessons/x?locale=pt-BR&step=3"}, follow_redirects=False
    )
    assert response.headers["location"] == "/lessons/x?step=3"


def test_chooser_sets_the_cookie_and_returns_to_the_page(client: TestClient) -> None:
    response = client.get(
        "/locale/pt-BR", params={"next": "/lessons/x?step=3"}, follow_redirects=False
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/lessons/x?step=3"
    assert "rdv_locale=pt-BR" in response.headers["set-cookie"]
    assert "samesite=lax" in response.headers["set-cookie"].lower()


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "evil", "/\\evil"])
def test_chooser_never_redirects_off_site(client: TestClient, target: str) -> None:
    response = client.get("/locale/tr", params={"next": target}, follow_redirects=False)
    location = response.headers["location"]
    assert location.startswith("/") and not location.startswith("//")


def test_chooser_ignores_unknown_locales(client: TestClient) -> None:
    response = client.get("/locale/xx", params={"next": "/"}, follow_redirects=False)
    assert response.status_code == 303
    assert "rdv_locale" not in response.headers.get("set-cookie", "")
