"""What every backend's prepared sandbox shares (grader.sandbox.bwrap, grader.sandbox.docker):
its output before and after its launch is assigned, its readiness and its age.

Before the launch is assigned nothing but the supervisor's READY line counts (its start-up noise
is kept for the log); after, the launch's OutputCap. A cold launch attaches its cap at once."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from grader.launch.wire import READY
from grader.sandbox.base import Preparation, SandboxRequest
from grader.sandbox.process import OutputCap

log = logging.getLogger(__name__)


def log_untaken(what: str, req: SandboxRequest) -> None:
    """Say why a prepared `what` ("sandbox", "container") never took `req`'s launch: the launch
    was cancelled (nothing more runs), or the box ended first (the launch then runs cold)."""
    if req.cancel is not None and req.cancel.is_set():
        log.info("a warm %s stopped before its job: the launch was cancelled", what)
    else:
        log.warning("a warm %s ended before taking its job; starting a cold one", what)


class PreparedOutput:
    """The combined output of a sandbox's command, whoever reads it and whenever."""

    def __init__(self, cap: OutputCap | None = None) -> None:
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.before: list[bytes] = []
        self.partial = bytearray()
        self.cap = cap

    def attach(self, cap: OutputCap) -> None:
        with self.lock:
            self.cap = cap

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            if self.cap is not None:
                self.cap.feed(chunk)
                return
            self.partial += chunk
            while (cut := self.partial.find(b"\n")) >= 0:
                line = bytes(self.partial[:cut])
                del self.partial[: cut + 1]
                if line.decode("utf-8", "replace") == READY:
                    self.ready.set()
                elif len(self.before) < 50:
                    self.before.append(line[:2000])

    def flush(self) -> None:
        with self.lock:
            if self.cap is not None:
                self.cap.flush()


def drain(fd: int, output: PreparedOutput) -> None:
    """Read a pipe into `output` until EOF (a thread's target); closes the fd."""
    try:
        while chunk := os.read(fd, 65536):
            output.feed(chunk)
    except OSError:
        pass
    finally:
        os.close(fd)
        output.flush()


def supervisor_wait_argv(prep: Preparation) -> list[str]:
    """A prepared sandbox's command: the supervisor waits up to `idle_s` for a job, its zygote
    forked (grader.inside.zygote)."""
    return [*supervisor_argv(), f"--wait={prep.idle_s:.0f}"]


def supervisor_argv() -> list[str]:
    """The supervisor's command, cold or warm: `-u` as every rank's (its zygote forks them, and
    they keep its interpreter's flags)."""
    return [sys.executable, "-u", "-m", "grader.inside.supervisor"]


class Readiness:
    """Readiness and age of a prepared sandbox, whatever the backend: it is ready once its
    supervisor printed READY into `output` and it is still `alive()`."""

    output: PreparedOutput
    started: float
    idle_s: float

    def alive(self) -> bool:
        raise NotImplementedError

    def ready(self) -> bool:
        return self.output.ready.is_set() and self.alive()

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.alive():
            if self.output.ready.wait(0.1):
                return self.alive()
        return self.ready()

    def expires_in(self) -> float:
        return self.started + self.idle_s - time.monotonic()

    def before_output(self) -> list[bytes]:
        """What the supervisor wrote before its launch was assigned (for the log)."""
        return list(self.output.before)
