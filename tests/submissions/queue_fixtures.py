"""Running the procrastinate backend and real worker processes against a test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.config import REPO_ROOT
from app.submissions.exercises import SpecLookup
from app.submissions.queue import ProcrastinateBackend
from tests.submissions.helpers import SessionFactory, make_uow

# Short heartbeats so a killed worker is noticed in seconds, not the production 30 s.
FAST_STALL = ["--heartbeat", "0.5", "--stalled-after", "3", "--retry-every", "1"]


def conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


class Workers:
    """Grader worker subprocesses started by one test; each is ended at teardown."""

    def __init__(self, url: str, logs: Path) -> None:
        self.url = url
        self.logs = logs
        self.started: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        module: str = "grader.worker",
        *,
        env: dict[str, str] | None = None,
        extra: list[str] | None = None,
    ) -> subprocess.Popen[bytes]:
        log = (self.logs / f"worker-{len(self.started)}.log").open("wb")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                module,
                "--queue",
                "cpu",
                "--dsn",
                conninfo(self.url),
                *FAST_STALL,
                *(extra or []),
            ],
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started.append(process)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker alone, as an OOM killer or a lost machine would."""
        process.send_signal(signal.SIGKILL)
        process.wait()

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@pytest.fixture
def pg_uow(pg_url: str) -> Iterator[SessionFactory]:
    factory, dispose = make_uow(pg_url)
    yield factory
    dispose()


@pytest.fixture
def start_backend(
    pg_url: str, pg_uow: SessionFactory
) -> Iterator[Callable[..., ProcrastinateBackend]]:
    made: list[ProcrastinateBackend] = []

    def start(
        spec_for: SpecLookup, max_attempts: int = 2, grade_stalled_seconds: float = 60.0
    ) -> ProcrastinateBackend:
        backend = ProcrastinateBackend(
            pg_uow,
            conninfo=conninfo(pg_url),
            spec_for=spec_for,
            max_attempts=max_attempts,
            poll_seconds=0.1,
            sweep_seconds=1.0,
            heartbeat_seconds=0.5,  # the test workers take 3 s of silence for death
            grade_stalled_seconds=grade_stalled_seconds,
        )
        backend.start()
        made.append(backend)
        return backend

    yield start
    for backend in made:
        backend.stop()


@pytest.fixture
def workers(pg_url: str, tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(pg_url, tmp_path)
    yield pool
    pool.stop_all()
