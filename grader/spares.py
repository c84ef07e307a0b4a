"""Spare ranks: interpreters a warm supervisor starts ahead of its job, each to become one rank.

A spare is `python -u -m grader.harness main.py`, the very command torchrun's agent runs for a
rank, started by the supervisor (the process the agent runs in) as its own session. It imports
torch and the harness's hooks, tells the supervisor it is ready over a socket, and waits. When
the agent starts a rank, `SubprocessHandler._popen` (patched here, in the supervisor only) hands
the rank to a spare instead of starting a new process: the rank's argv, environment and cwd go
over the socket, its stdout/stderr descriptors with them (SCM_RIGHTS). The spare takes them over
and runs the rank exactly as a spawned one does (grader.harness.spare). The agent holds the
spare's own `Popen`, so it polls, signals (its process group) and reaps it as any worker.

Each spare is a fresh interpreter: its own str hash seed and generators, no inherited threads,
locks or descriptors: what forking ranks from the supervisor could not give. A rank the spares
cannot serve (none left, one died, an unexpected command) is started by torch as usual.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

SPARE_FD_ENV = "RDV_SPARE_FD"
READY_BYTE = b"R"
# How long a rank waits for a spare that is still importing before torch starts one itself.
READY_WAIT_S = 60.0


@dataclass
class Spare:
    proc: subprocess.Popen[bytes]
    sock: socket.socket
    ready: bool = False

    def wait_ready(self, timeout_s: float) -> bool:
        """True once the spare said it is ready; False if it died or did not say so in time."""
        deadline = time.monotonic() + timeout_s
        while not self.ready:
            if self.proc.poll() is not None:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            readable, _, _ = select.select([self.sock], [], [], min(left, 0.2))
            if readable:
                got = self.sock.recv(1)
                if got != READY_BYTE:  # EOF: it is dying
                    return False
                self.ready = True
        return self.proc.poll() is None

    def discard(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, 9)
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


class Spares:
    """The spares of one warm supervisor."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.idle: list[Spare] = []
        self.served = 0
        self.refill = 0  # replacements to start as spares are taken (restarts of this job)
        self.pending = 0  # replacements being started
        self.closed = False

    def start(self, count: int, env: dict[str, str] | None = None) -> None:
        """Start `count` spares, in `env` (default: ours)."""
        for _ in range(count):
            spare = self._spawn(os.environ if env is None else env)
            if spare is None:
                continue
            with self.lock:
                if not self.closed:
                    self.idle.append(spare)
                    self.changed.notify_all()
                    continue
            spare.discard()  # started as the spares were closed

    def _spawn(self, env: Mapping[str, str]) -> Spare | None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = subprocess.Popen(
                self.command,
                env={**env, SPARE_FD_ENV: str(theirs.fileno())},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # as torch starts a rank: its own process group
            )
        except OSError:
            log.exception("could not start a spare rank")
            ours.close()
            return None
        finally:
            theirs.close()
        return Spare(proc, ours)

    def for_job(self, nproc: int, max_restarts: int) -> None:
        """The job is known: keep `nproc` spares, and replace those taken while restarts may
        need them; the rest go now (they would hold memory the program is allowed)."""
        with self.lock:
            extra, self.idle = self.idle[nproc:], self.idle[:nproc]
            self.refill = nproc if max_restarts > 0 else 0
        for spare in extra:
            spare.discard()

    def take(self) -> Spare | None:
        while True:
            with self.lock:
                # A replacement still being started is waited for (a restart's ranks come right
                # after the first ones were taken): it is as far along as a rank torch would start.
                deadline = time.monotonic() + READY_WAIT_S
                while not self.idle and self.pending and not self.closed:
                    if not self.changed.wait(deadline - time.monotonic()):
                        break  # a start that hangs: torch starts the rank itself
                if not self.idle:
                    return None
                spare = self.idle.pop(0)
                if self.refill > 0:
                    self.pending += 1
                    threading.Thread(target=self._replace, daemon=True).start()
            if spare.wait_ready(READY_WAIT_S):
                return spare
            spare.discard()

    def _replace(self) -> None:
        try:
            self.start(1)
        finally:
            with self.lock:
                self.pending -= 1
                self.changed.notify_all()

    def close(self) -> None:
        with self.lock:
            idle, self.idle, self.refill = self.idle, [], 0
            self.closed = True
            self.changed.notify_all()
        for spare in idle:
            spare.discard()


def hand_over(spare: Spare, argv: list[str], env: dict[str, str], fds: tuple[int, int]) -> bool:
    """Give a ready spare its rank: argv, environment, cwd and the stdout/stderr descriptors."""
    message = json.dumps({"argv": argv, "env": env, "cwd": os.getcwd()}).encode()
    try:
        socket.send_fds(spare.sock, [len(message).to_bytes(8, "big")], list(fds))
        spare.sock.sendall(message)
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            spare.sock.close()
    return True


def _recv_exactly(sock: socket.socket, size: int, got: bytes = b"") -> bytes:
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        if not chunk:
            raise EOFError("the supervisor closed the socket")
        got += chunk
    return got


def ready_and_receive() -> list[str] | None:
    """The spare's side (call it once its imports are done): say it is ready, wait for its
    process, and take it over: the stdout/stderr descriptors, the cwd, the whole environment (ours
    is cleared) and `sys.orig_argv`. Its argv, or None when the spare was let go unused."""
    fd = int(os.environ.pop(SPARE_FD_ENV))
    sock = socket.socket(fileno=fd)
    try:
        sock.sendall(READY_BYTE)
        head, fds, _flags, _addr = socket.recv_fds(sock, 8, 2)
        if not head:
            return None
        head = _recv_exactly(sock, 8, head)
        message = json.loads(_recv_exactly(sock, int.from_bytes(head, "big")))
    except (OSError, EOFError, ValueError):
        return None
    finally:
        sock.close()
    if len(fds) != 2:
        return None
    out, err = fds
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    os.chdir(message["cwd"])
    os.environ.clear()
    os.environ.update(message["env"])
    argv: list[str] = message["argv"]
    sys.orig_argv[:] = argv
    return argv


def rank_command(python: str) -> list[str]:
    """The command torch's agent runs for a rank (grader.supervisor), and a spare's own."""
    return [python, "-u", "-m", "grader.harness", "main.py"]


def install(spares: Spares) -> None:
    """Route the agent's worker starts (in this process) to the spares."""
    from torch.distributed.elastic.multiprocessing.subprocess_handler import (
        subprocess_handler as handler_module,
    )

    original = handler_module.SubprocessHandler._popen
    prefix = rank_command(sys.executable)[:4]

    def _popen(self: Any, args: tuple[str, ...], env: dict[str, str]) -> subprocess.Popen[bytes]:
        if list(args[:4]) == prefix:
            spare = spares.take()
            if spare is not None:
                out = self._stdout.fileno() if self._stdout else 1
                err = self._stderr.fileno() if self._stderr else 2
                if hand_over(spare, [str(a) for a in args], dict(env), (out, err)):
                    spares.served += 1
                    return spare.proc
                spare.discard()
        return original(self, args, env)

    handler_module.SubprocessHandler._popen = _popen  # type: ignore[method-assign]
