"""What a lesson page costs a first-time visitor in Chromium: the JS and CSS bytes transferred
(compressed, as sent), at most 200 KB. Bytes, not timing: the number holds on a loaded machine."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import LiveServer

LESSON_URL = "/lessons/ddp-fundamentals"
BUDGET_BYTES = 200 * 1024


def transferred_js_css(browser: Any, server: LiveServer, url: str) -> dict[str, int]:
    """Bytes on the wire (body as encoded plus headers) per JS/CSS URL, from a cold cache."""
    context = browser.new_context(base_url=server.url)
    try:
        page = context.new_page()
        responses: list[Any] = []
        page.on("response", lambda response: responses.append(response))
        page.goto(url, wait_until="networkidle")
        sizes = {}
        for response in responses:
            if response.request.resource_type in ("script", "stylesheet"):
                size = response.request.sizes()
                sizes[response.url] = size["responseBodySize"] + size["responseHeadersSize"]
        return sizes
    finally:
        context.close()


def test_a_lesson_page_transfers_at_most_200_kb_of_js_and_css(
    browser: Any, live_server: LiveServer
) -> None:
    sizes = transferred_js_css(browser, live_server, LESSON_URL)
    assert any("codemirror.js" in url for url in sizes)  # the editor is part of the budget
    assert len(sizes) == len(set(sizes))
    total = sum(sizes.values())
    print(f"lesson page JS+CSS transferred: {total} bytes ({total / 1024:.1f} KiB): {sizes}")
    assert total <= BUDGET_BYTES, sizes


def test_the_course_page_loads_no_editor(browser: Any, live_server: LiveServer) -> None:
    sizes = transferred_js_css(browser, live_server, "/")
    assert not any("codemirror" in url or "submit.js" in url for url in sizes)
