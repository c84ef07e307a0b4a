"""What a warm sandbox's output goes to, whatever the backend (grader.sandbox.bwrap_warm,
grader.sandbox.docker_warm): before its launch is assigned nothing but the supervisor's READY line
counts (its start-up noise is kept for the log); after, the launch's OutputCap."""

from __future__ import annotations

import sys
import threading
import time

from grader.sandbox.process import OutputCap

READY_LINE = "\x1eRDV-READY"  # grader.supervisor.READY (not imported: that pulls in the harness)


class WarmSink:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.before: list[bytes] = []
        self.partial = bytearray()
        self.cap: OutputCap | None = None

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
                if line.decode("utf-8", "replace") == READY_LINE:
                    self.ready.set()
                elif len(self.before) < 50:
                    self.before.append(line[:2000])

    def flush(self) -> None:
        with self.lock:
            if self.cap is not None:
                self.cap.flush()


def supervisor_wait_argv(idle_s: float, spares: int = 0, nodes: int = 1) -> list[str]:
    """A warm supervisor's command: wait up to `idle_s` for a job, with `spares` spare ranks per
    node and, for a simulated job of several `nodes`, an agent per node (grader.inside.spares)."""
    argv = [sys.executable, "-m", "grader.supervisor", f"--wait={idle_s:.0f}", f"--spares={spares}"]
    if nodes > 1:
        argv.append(f"--nodes={nodes}")
    return argv


class WarmReadiness:
    """Readiness and age of a pre-started sandbox, whatever the backend: it is ready once its
    supervisor printed READY into `sink` and it is still `alive()`."""

    sink: WarmSink
    started: float
    idle_s: float

    def alive(self) -> bool:
        raise NotImplementedError

    def ready(self) -> bool:
        return self.sink.ready.is_set() and self.alive()

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.alive():
            if self.sink.ready.wait(0.1):
                return self.alive()
        return self.ready()

    def expires_in(self) -> float:
        return self.started + self.idle_s - time.monotonic()
