"""`/docs` and `/redoc` render the API reference in Chromium under their content security
policy, from this site's own files: every response comes from the site, and the policy refuses
nothing the pages need (ReDoc's footer asks for Redocly's logo from its CDN; the policy refuses
it and the footer shows its text alone)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pytest

from tests.e2e.conftest import LiveServer


@pytest.mark.parametrize(
    ("path", "rendered"),
    [("/docs", ".opblock-summary-path"), ("/redoc", "[data-section-id^='tag/']")],
)
def test_the_api_reference_renders_from_this_site_alone(
    page: Any, live_server: LiveServer, path: str, rendered: str
) -> None:
    problems: list[str] = []
    hosts: set[str] = set()
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("response", lambda answer: hosts.add(urlparse(answer.url).netloc))
    response = page.goto(path)
    assert response.status == 200
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(rendered, timeout=60_000)
    assert page.locator(rendered).count() > 5  # the operations, or the tags, are listed
    assert "/api/v1/courses" in page.content()
    assert hosts <= {urlparse(live_server.url).netloc, ""}
    refused = [
        text
        for text in problems
        if "Content Security Policy" in text and "cdn.redoc.ly/redoc/logo-mini.svg" not in text
    ]
    assert refused == []
