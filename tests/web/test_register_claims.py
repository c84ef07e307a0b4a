"""The register page promises only what exists (issue 38: it promised a mobile app)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize(
    ("locale", "promise"),
    [
        ("en", "every browser and device you sign in on"),
        ("tr", "oturum açtığınız her tarayıcıya ve cihaza"),
        ("pt-BR", "todo navegador e dispositivo em que você entrar"),
    ],
)
def test_the_register_page_promises_no_mobile_app(
    client: TestClient, locale: str, promise: str
) -> None:
    page = client.get(f"/register?locale={locale}").text
    assert promise in page
    for app in ("mobile app", "mobil uygulama", "aplicativo"):
        assert app not in page, app
