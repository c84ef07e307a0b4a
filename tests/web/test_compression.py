"""gzip for HTML pages and API JSON of 1 KiB or more (app/compression.py); small bodies, event
streams and requests another site started (BREACH) go out uncompressed."""

from __future__ import annotations

import gzip

from fastapi.testclient import TestClient

GZIP = {"Accept-Encoding": "gzip"}


def raw(client: TestClient, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and the body as sent (not decoded)."""
    with client.stream("GET", path, headers={**GZIP, **headers}) as response:
        body = b"".join(response.iter_raw())
        return response.status_code, dict(response.headers), body


def test_a_lesson_page_goes_out_gzipped(client: TestClient) -> None:
    status, headers, body = raw(client, "/lessons/ddp-fundamentals")
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert "accept-encoding" in headers["vary"].lower()
    html = gzip.decompress(body)
    assert html.startswith(b"<!doctype html>") and len(body) < len(html) / 3


def test_api_json_over_1_kib_is_gzipped_and_small_json_is_not(client: TestClient) -> None:
    status, headers, body = raw(client, "/api/v1/lessons/ddp-fundamentals")
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert gzip.decompress(body).startswith(b"{")
    status, headers, body = raw(client, "/healthz")
    assert len(body) < 1024 and "content-encoding" not in headers


def test_requests_another_site_started_are_not_compressed(client: TestClient) -> None:
    for site in ("cross-site", "same-site"):
        status, headers, body = raw(client, "/lessons/ddp-fundamentals", **{"Sec-Fetch-Site": site})
        assert status == 200 and "content-encoding" not in headers
        assert body.startswith(b"<!doctype html>")
    status, headers, _ = raw(
        client, "/lessons/ddp-fundamentals", **{"Sec-Fetch-Site": "same-origin"}
    )
    assert headers["content-encoding"] == "gzip"


def test_static_assets_keep_their_own_compression(client: TestClient) -> None:
    status, headers, body = raw(client, "/static/css/site.css")
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert gzip.decompress(body)  # compressed once, not twice
