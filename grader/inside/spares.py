"""Spare ranks: interpreters a warm supervisor starts ahead of its job, each to become one rank.

A spare is `python -u -m grader.harness main.py`, the very command torchrun's agent runs for a
rank, started by the supervisor (the process the agent runs in) as its own session. It imports
torch and the harness's hooks, tells the supervisor it is ready over a socket, and waits.

The agent starts each rank as usual, through torch's own process handling, but its command is
inside/rank_shim.py (`SpareServer.entry_args`): a bare interpreter that connects to this process's
`SpareServer` and hands over the rank's argv, environment, cwd and descriptors 0, 1, 2
(SCM_RIGHTS). A spare takes them over and runs the rank exactly as a spawned one does
(grader.harness.spare); the shim, which the agent holds, relays the agent's signals to the
spare's process group and ends as the spare ended (its exit code, or death by its signal). A
rank the spares cannot serve (none left, one died, an unexpected command) is the shim's own
`execv` of the real command: a cold start.

Each spare is a fresh interpreter: its own str hash seed and generators, no inherited threads,
locks or descriptors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from grader.inside.rank_shim import COLD, SERVED, STATUS
from grader.launch.wire import SpareHandover

log = logging.getLogger(__name__)

SPARE_FD_ENV = "RDV_SPARE_FD"
READY_BYTE = b"R"
# How long a rank waits for a spare that is still importing before torch starts one itself.
READY_WAIT_S = 60.0
# The agent's per-rank command when spares wait: `python -I -S SHIM SOCKET ARGS...`.
SHIM = str(Path(__file__).with_name("rank_shim.py"))


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


def hand_over(
    spare: Spare,
    argv: list[str],
    env: dict[str, str],
    fds: tuple[int, int, int],
    cwd: str | None = None,
) -> bool:
    """Give a ready spare its process: argv, environment, cwd and descriptors 0, 1 and 2."""
    message = SpareHandover(tuple(argv), env, cwd or os.getcwd()).to_json().encode()
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
            raise EOFError("the other side closed the socket")
        got += chunk
    return got


def _receive(sock: socket.socket) -> tuple[SpareHandover, list[int]] | None:
    """One hand-over (hand_over's or the rank shim's) and its 3 descriptors; None for anything
    else (a closed socket, a damaged message, not three descriptors)."""
    fds: list[int] = []
    try:
        head, fds, _flags, _addr = socket.recv_fds(sock, 8, 3)
        if not head:
            return None
        head = _recv_exactly(sock, 8, head)
        message = SpareHandover.from_json(_recv_exactly(sock, int.from_bytes(head, "big")))
    except (OSError, EOFError, ValueError):  # WireError is a ValueError
        _close_all(fds)
        return None
    if len(fds) != 3:
        _close_all(fds)
        return None
    return message, fds


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def ready_and_receive() -> list[str] | None:
    """The spare's side (call it once its imports are done): say it is ready, wait for its
    process, and take it over: descriptors 0, 1 and 2, the cwd, the whole environment (ours is
    cleared) and `sys.orig_argv`. Its argv, or None when the spare was let go unused."""
    fd = int(os.environ.pop(SPARE_FD_ENV))
    sock = socket.socket(fileno=fd)
    try:
        sock.sendall(READY_BYTE)
        got = _receive(sock)
    except OSError:
        got = None
    finally:
        sock.close()
    if got is None:
        return None
    message, fds = got
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(message.cwd)
    os.environ.clear()
    os.environ.update(message.env)
    argv = list(message.argv)
    sys.orig_argv[:] = argv
    return argv


def rank_command(python: str) -> list[str]:
    """The command torch's agent runs for a rank (grader.inside.supervisor), and a spare's own."""
    return [python, "-u", "-m", "grader.harness", "main.py"]


class SpareServer:
    """Where the agent's ranks get their spares: the agent starts each rank as inside/rank_shim.py
    (`entry_args`), which connects here; a spare takes the rank, and the shim waits for it, passes
    the agent's signals on and ends as it ends. A public way in (the agent's entrypoint and
    arguments), so torch's own process handling (environment, log files, restarts, stops) is
    untouched."""

    def __init__(self, spares: Spares) -> None:
        self.spares = spares
        self.dir = tempfile.mkdtemp(prefix=".rdv-spares-")
        self.path = os.path.join(self.dir, "s")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def entry_args(self, args: list[str]) -> list[str]:
        """The arguments for `python` (the agent's entrypoint) that start a rank whose own are
        `args` through the shim: `-I -S` keeps its start-up to the interpreter's core."""
        return ["-I", "-S", SHIM, self.path, *args]

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            got = _receive(conn)
            if got is None:
                return
            message, fds = got
            spare = None
            try:
                argv = list(message.argv)
                if argv[1:4] == rank_command(sys.executable)[1:4]:
                    spare = self.spares.take()
                if spare is not None and not hand_over(
                    spare, argv, dict(message.env), (fds[0], fds[1], fds[2]), message.cwd
                ):
                    spare.discard()
                    spare = None
                if spare is not None:
                    self.spares.served += 1
                conn.sendall(SERVED if spare is not None else COLD)
            except OSError:
                if spare is not None:  # the shim is gone: so is its rank
                    _kill_group(spare.proc, signal.SIGKILL)
            finally:
                _close_all(fds)
            if spare is not None:
                self._watch(conn, spare.proc)

    def _watch(self, conn: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        """Pass the shim's signals on to the spare until it ends; then send its exit status."""

        def relay() -> None:
            while True:
                try:
                    got = conn.recv(1)
                except OSError:
                    got = b""
                if not got:  # the shim was killed (SIGKILL to its group): its rank goes too
                    _kill_group(proc, signal.SIGKILL)
                    return
                _kill_group(proc, got[0])

        threading.Thread(target=relay, daemon=True).start()
        status = proc.wait()
        with contextlib.suppress(OSError):
            conn.sendall(STATUS.pack(status))
            conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self.dir)


def serve(spares: Spares) -> SpareServer | None:
    """A server for `spares`, or None where its socket cannot be made (the ranks start cold)."""
    try:
        return SpareServer(spares)
    except OSError:
        log.exception("no spare server: the ranks start cold")
        spares.close()
        return None


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal a spare's process group (it leads its own session, as a spawned rank does)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
