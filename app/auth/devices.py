"""A browser's device name from its User-Agent: browser and major version, then the system and
its version where the agent says it ("Chrome 131 · Android 14", "Firefox 133 · Windows",
"Safari 18 · iPhone iOS 18.1"). Names stay language-neutral: they are stored once and shown in
every locale. Clients that name themselves (the API's `device_name`) keep their own label."""

from __future__ import annotations

import re

# Most specific first: Edge, Opera and Samsung Internet also say "Chrome", Chrome says "Safari".
_BROWSERS: tuple[tuple[str, str], ...] = (
    (r"Edg(?:e|A|iOS)?/(\d+)", "Edge"),
    (r"OPR/(\d+)", "Opera"),
    (r"SamsungBrowser/(\d+)", "Samsung Internet"),
    (r"(?:Firefox|FxiOS)/(\d+)", "Firefox"),
    (r"HeadlessChrome/(\d+)", "Headless Chrome"),
    (r"(?:Chrome|CriOS)/(\d+)", "Chrome"),
    (r"Version/(\d+)[\d.]* (?:Mobile/\S+ )?Safari/", "Safari"),
)


def _system(agent: str) -> str | None:
    if match := re.search(r"Android (\d+(?:\.\d+)?)", agent):
        return f"Android {match.group(1)}"
    if match := re.search(r"(iPhone|iPad|iPod).*? OS (\d+)(?:_(\d+))?", agent):
        version = match.group(2) + (f".{match.group(3)}" if match.group(3) else "")
        return f"{match.group(1)} iOS {version}"
    if "CrOS" in agent:
        return "ChromeOS"
    if "Windows" in agent:
        return "Windows"
    if "Mac OS X" in agent:
        return "macOS"
    if "Android" in agent:
        return "Android"
    if "Linux" in agent:
        return "Linux"
    return None


def browser_device_name(agent: str) -> str:
    """The name a browser's sign-in gets in the account's device list."""
    browser = "Browser"
    for pattern, name in _BROWSERS:
        if match := re.search(pattern, agent):
            browser = f"{name} {match.group(1)}"
            break
    system = _system(agent)
    return f"{browser} · {system}" if system else browser
