"""The installable app's server side: the manifest in the viewer's language, the service worker
with the shell's content-hashed URLs and a version that follows them, the offline page, and the
links every page carries to them."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from app.i18n import SUPPORTED_LOCALES
from app.templating import STATIC_DIR, static_url
from app.web import pwa


def _manifest(client: TestClient, locale: str) -> dict[str, object]:
    response = client.get("/manifest.webmanifest", headers={"Accept-Language": locale})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/manifest+json")
    assert response.headers["content-language"] == locale
    data: dict[str, object] = response.json()
    return data


def test_the_manifest_meets_the_install_criteria_in_three_languages(client: TestClient) -> None:
    names = {}
    for locale in SUPPORTED_LOCALES:
        manifest = _manifest(client, locale)
        assert manifest["lang"] == locale
        assert manifest["display"] == "standalone"
        assert manifest["start_url"] == "/" and manifest["scope"] == "/"
        assert manifest["theme_color"] == pwa.THEME_COLOUR
        icons = manifest["icons"]
        assert isinstance(icons, list)
        sizes = {icon["sizes"] for icon in icons if icon["type"] == "image/png"}
        assert {"192x192", "512x512"} <= sizes  # what Chromium's installability asks for
        for icon in icons:
            assert client.get(icon["src"]).status_code == 200
        names[locale] = manifest["name"]
    assert names["en"] == "Rendezvous: PyTorch distributed training"
    assert len(set(names.values())) == 3  # translated, not English three times


def test_the_png_icons_are_the_sizes_they_claim() -> None:
    for size in (192, 512):
        header = (STATIC_DIR / f"icons/icon-{size}.png").read_bytes()[:24]
        assert header[:8] == b"\x89PNG\r\n\x1a\n"
        assert int.from_bytes(header[16:20], "big") == size
        assert int.from_bytes(header[20:24], "big") == size


def _worker_settings(client: TestClient) -> dict[str, object]:
    response = client.get("/sw.js")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/javascript")
    assert response.headers["cache-control"] == "no-cache"  # browsers see a new version at once
    first_line = response.text.split("\n", 1)[0]
    match = re.fullmatch(r"self\.RDV = (\{.*\});", first_line)
    assert match, first_line
    settings: dict[str, object] = json.loads(match.group(1))
    return settings


def test_the_worker_precaches_the_shell_by_content_hash(client: TestClient) -> None:
    settings = _worker_settings(client)
    shell = settings["shell"]
    assert isinstance(shell, list)
    assert "/offline" in shell and "/" in shell
    for path in pwa.SHELL_ASSETS:
        assert static_url(path) in shell  # the same ?v=<hash> URLs the pages load
    for url in shell:
        assert client.get(url).status_code == 200, url
    assert settings["client"] == static_url("js/rdv-client.js")


def test_a_changed_shell_asset_is_a_new_worker_version(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _worker_settings(client)["version"]
    assert _worker_settings(client)["version"] == before  # stable while nothing changes
    monkeypatch.setattr(
        pwa, "static_url", lambda path: static_url(path).replace("?v=", "?v=changed")
    )
    assert _worker_settings(client)["version"] != before


def test_the_offline_page_speaks_the_viewer_s_language(client: TestClient) -> None:
    english = client.get("/offline", headers={"Accept-Language": "en"})
    assert english.status_code == 200
    assert "You are offline" in english.text
    turkish = client.get("/offline", headers={"Accept-Language": "tr"})
    assert "Çevrimdışısınız" in turkish.text
    assert "data-offline-lessons" in turkish.text


def test_every_page_links_the_manifest_and_loads_the_client(client: TestClient) -> None:
    for path in ("/", "/lessons/ddp-fundamentals", "/login"):
        page = client.get(path)
        assert '<link rel="manifest" href="/manifest.webmanifest">' in page.text, path
        assert 'name="rdv-account" content="visitor"' in page.text, path
        client_at = page.text.index(static_url("js/rdv-client.js"))
        assert client_at < page.text.index(static_url("js/pwa.js")), path
    lesson = client.get("/lessons/ddp-fundamentals").text
    # A visitor's steps are kept too: the progress recorder loads before lesson.js.
    assert lesson.index(static_url("js/progress.js")) < lesson.index(static_url("js/lesson.js"))
