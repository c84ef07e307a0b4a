"""A real `python -m app serve` process on 127.0.0.1 (uvicorn), on a SQLite file or a fresh
PostgreSQL database, for the tests where the server itself is the point (slow clients, the
admission limit under attack)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from app.config import REPO_ROOT
from tests.conftest import PG_ADMIN_URL

STARTUP_DEADLINE_S = 180.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _postgres_url() -> str:
    name = f"rdv_served_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def _drop_postgres(url: str) -> None:
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)'))
    admin.dispose()


@dataclass(frozen=True)
class Server:
    url: str
    database_url: str
    process: subprocess.Popen[bytes] | None = None  # to signal it (a test of stopping)


@contextmanager
def served(backend: str, tmp_path: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    """The server while it runs (`backend`: "sqlite" or "postgres"; `env`: more RDV_ settings);
    stopped, and its PostgreSQL database dropped, after."""
    database_url = f"sqlite:///{tmp_path / 'served.db'}" if backend == "sqlite" else _postgres_url()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    full_env = {
        **os.environ,
        "RDV_ENVIRONMENT": "test",
        "RDV_DATABASE_URL": database_url,
        "RDV_BASE_URL": url,
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO_ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                if httpx.get(f"{url}/api/v1/courses", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        yield Server(url, database_url, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if backend == "postgres":
            _drop_postgres(database_url)


class SilentRelay:
    """A mail relay that accepts connections and never says a word (the app's SMTP client waits
    for its greeting until its timeout)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.listener.accept()[0])

    def close(self) -> None:
        self.listener.close()
        for connection in self.held:
            connection.close()
