"""Run one command with a hard wall clock, capture its combined output capped, stream lines.

Shared by the backends that start a local process ("none", "bwrap").
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader.sandbox._exec import ExecSpec
from grader.sandbox.base import OutputCallback, wait_for_process

log = logging.getLogger(__name__)

EXEC_WRAPPER = Path(__file__).with_name("_exec.py")
# How long to wait for the output pipe to close after the command itself has ended.
DRAIN_AFTER_EXIT_S = 3.0
MAX_LINE_BYTES = 16 * 1024


def wrapper_argv(spec: ExecSpec) -> list[str]:
    """argv that runs `_exec.py` with `spec`."""
    return [sys.executable, "-I", "-S", "-B", str(EXEC_WRAPPER), spec.to_json()]


@dataclass
class ProcessResult:
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output: str
    truncated: bool


class OutputCap:
    """Keeps the first `cap` bytes of a stream; calls `on_output` once per line kept."""

    def __init__(self, cap: int, on_output: OutputCallback | None) -> None:
        self.cap = cap
        self.on_output = on_output
        self.kept = bytearray()
        self.dropped = 0
        self._partial = bytearray()

    def _emit(self, line: bytes) -> None:
        if self.on_output is None:
            return
        try:
            self.on_output(line.decode("utf-8", "replace").rstrip("\n"))
        except Exception:  # a broken listener must not stop the draining of the output
            log.exception("output listener failed; not streaming the rest")
            self.on_output = None

    def feed(self, chunk: bytes) -> None:
        room = self.cap - len(self.kept)
        if room <= 0:
            self.dropped += len(chunk)
            return
        keep, extra = chunk[:room], chunk[room:]
        self.kept += keep
        self.dropped += len(extra)
        self._partial += keep
        while (cut := self._partial.find(b"\n")) >= 0:
            self._emit(bytes(self._partial[: cut + 1]))
            del self._partial[: cut + 1]
        if len(self._partial) >= MAX_LINE_BYTES:
            self._emit(bytes(self._partial))
            self._partial.clear()

    def flush(self) -> None:
        if self._partial:
            self._emit(bytes(self._partial))
            self._partial.clear()

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def text(self) -> str:
        out = self.kept.decode("utf-8", "replace")
        if self.dropped:
            if out and not out.endswith("\n"):
                out += "\n"
            out += (
                f"[output truncated: the program wrote more than {self.cap} bytes; "
                f"{self.dropped} more bytes were dropped]\n"
            )
        return out


class _PipeReader:
    """Drains a pipe into an OutputCap on a thread, until EOF or until told to stop."""

    def __init__(self, fd: int, sink: OutputCap) -> None:
        self.fd = fd
        self.sink = sink
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sandbox-output", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while True:
                if not poller.poll(200):
                    if self.stop.is_set():
                        break
                    continue
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                self.sink.feed(chunk)
        finally:
            os.close(self.fd)
            self.sink.flush()


def run_supervised(
    argv: list[str],
    *,
    cwd: Path,
    timeout_s: float,
    output_cap: int,
    on_output: OutputCallback | None,
    kill_tree: Callable[[subprocess.Popen[bytes]], None],
    pass_fds: tuple[int, ...] = (),
    cancel: threading.Event | None = None,
) -> ProcessResult:
    """Run argv (with an empty environment: the wrapper sets the command's own), capture output.

    `kill_tree` must kill everything the command started; it is called at the wall clock (or
    when `cancel` is set) and again after the command ends (to take down anything left behind).
    """
    start = time.monotonic()
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            cwd=cwd,
            env={},
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
        )
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    os.close(write_fd)
    sink = OutputCap(output_cap, on_output)
    collector = _PipeReader(read_fd, sink)
    collector.start()

    timed_out = False
    try:
        if not wait_for_process(proc, timeout_s, cancel):
            timed_out = True
            kill_tree(proc)
            proc.wait()
    except BaseException:
        kill_tree(proc)
        proc.wait()
        raise
    finally:
        duration = time.monotonic() - start
        kill_tree(proc)
        collector.thread.join(DRAIN_AFTER_EXIT_S)
        # Something outside our reach may still hold the pipe: stop reading (the reader closes it).
        collector.stop.set()
        collector.thread.join()
    return ProcessResult(
        # A death by signal N is reported as 128+N, as bwrap, docker and shells report it.
        exit_code=128 - proc.returncode if proc.returncode < 0 else proc.returncode,
        timed_out=timed_out,
        duration_s=duration,
        output=sink.text(),
        truncated=sink.truncated,
    )


def kill_process_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group (it was started in its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
