"""Browser tests: a real `python -m app serve` on a free port with its own SQLite database,
driven by Playwright through Debian's Chromium (/usr/bin/chromium, headless; no download).

Fixtures for every e2e test (session-scoped, so one server and one browser per test process):
- `live_server`: a LiveServer with `.url`; `start_live_server(tmp_dir, extra_env)` starts another
  one with different settings (e.g. another grading backend) from a test's own fixture.
- `browser`: a Playwright Browser; `page`: a fresh context and page per test (1280x800).
- `sign_up(page, next_path)`: registers a new learner through the form (signed in afterwards).
All tests under tests/e2e get the `e2e` marker and share one xdist group.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.config import REPO_ROOT

CHROMIUM = "/usr/bin/chromium"
# How long the server may take to migrate and start on a loaded machine before we give up.
STARTUP_DEADLINE_S = 180.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.xdist_group("e2e"))


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    database_url: str

    def log(self) -> str:
        return self.log_path.read_text("utf-8", errors="replace")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_live_server(tmp_dir: Path, extra_env: Mapping[str, str] | None = None) -> LiveServer:
    """Start `python -m app serve` and wait until it answers; raises with its log otherwise."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    database_url = f"sqlite:///{tmp_dir / 'e2e.db'}"
    env = {
        **os.environ,
        "RDV_ENVIRONMENT": "test",
        "RDV_DATABASE_URL": database_url,
        "RDV_BASE_URL": url,
        "PYTHONUNBUFFERED": "1",
        # Every browser test signs learners up and in from 127.0.0.1, one server per test process.
        "RDV_AUTH_ADDRESS_LIMIT_FACTOR": "20",
        # The instructors' figures follow the learners' activity as when served for real.
        "RDV_ANALYTICS_AUTOSTART": "true",
        **(extra_env or {}),
    }
    log_path = tmp_dir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(url, process, log_path, database_url)
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{server.log()}")
        try:
            with urllib.request.urlopen(f"{url}/", timeout=5) as response:
                if response.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            stop_live_server(server)
            raise RuntimeError(f"the server did not answer at {url}:\n{server.log()}")
        time.sleep(0.2)


def stop_live_server(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_live_server(tmp_path_factory.mktemp("live-server"))
    yield server
    stop_live_server(server)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-system-deps.sh (Debian chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, live_server: LiveServer) -> Iterator[Any]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    new_page = context.new_page()
    yield new_page
    context.close()


def sign_up(page: Any, next_path: str = "/") -> None:
    """Register a new learner through the form, sign in on the page registering leads to (it
    signs nobody in), and land on next_path."""
    from tests.e2e.accounts import register_and_sign_in

    register_and_sign_in(
        page,
        name="Ada",
        email=f"e2e-{uuid.uuid4().hex[:12]}@example.org",
        password="correct horse battery staple",
        next=next_path,
    )
