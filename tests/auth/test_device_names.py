"""Devices named from their User-Agent (issue 38: every device was "Chrome on Linux")."""

from __future__ import annotations

import pytest

from app.auth.devices import browser_device_name

AGENTS = {
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Mobile Safari/537.36": "Chrome 131 · Android 14",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36": "Chrome 131 · Linux",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "HeadlessChrome/131.0.6778.33 Safari/537.36": "Headless Chrome 131 · Linux",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0": "Edge 131 · Windows",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 "
    "Firefox/133.0": "Firefox 133 · Windows",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Safari/605.1.15": "Safari 18 · macOS",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like "
    "Gecko) Version/18.1 Mobile/15E148 Safari/604.1": "Safari 18 · iPhone iOS 18.1",
    "Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1": "Chrome 131 · iPad iOS 17.4",
    "Mozilla/5.0 (Linux; Android 13; SM-S911B) AppleWebKit/537.36 (KHTML, like Gecko) "
    "SamsungBrowser/23.0 Chrome/115.0.0.0 Mobile Safari/537.36": "Samsung Internet 23 · Android 13",
    "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0": "Opera 115 · ChromeOS",
    "curl/8.5.0": "Browser",
}


@pytest.mark.parametrize(("agent", "name"), AGENTS.items())
def test_a_device_is_named_by_its_browser_and_system(agent: str, name: str) -> None:
    assert browser_device_name(agent) == name


def test_a_phone_and_a_computer_with_the_same_browser_differ() -> None:
    names = {browser_device_name(agent) for agent in AGENTS}
    assert len(names) == len(AGENTS)
