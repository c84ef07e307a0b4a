"""How ranks reach the learner's program without an interpreter start each, and the processes a
warm supervisor starts ahead of its job.

Ranks: torch's elastic agent starts each rank through its own process handling, with
inside/rank_shim.py as the command (`SpareServer.entry_args`): a bare interpreter that connects to
this process's `SpareServer` and hands over the rank's argv, environment, cwd and descriptors 0, 1,
2 (SCM_RIGHTS). The zygote (grader.inside.zygote) forks the rank with them; the shim, which the
agent holds, relays the agent's signals to the rank's process group and ends as the rank ended
(its exit code, or death by its signal). A rank the zygote cannot serve (none, it died, an
unexpected command) is the shim's own `execv` of the real command: a cold start.

Spares (`Spares`): processes started ahead that wait to be handed their process the same way
(`hand_over`, `ready_and_receive`): a simulated multi-node job's node agents
(grader.inside.multinode), each a fresh interpreter with its own zygote.
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
from grader.inside.zygote import ForkedRank, Zygote, close_all, receive, take_over
from grader.launch.wire import SpareHandover

log = logging.getLogger(__name__)

SPARE_FD_ENV = "RDV_SPARE_FD"
READY_BYTE = b"R"
# How long a spare still importing is waited for before the work starts without it.
READY_WAIT_S = 60.0
# The agent's per-rank command when a zygote forks the ranks: `python -I -S SHIM SOCKET ARGS...`.
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
    """Processes a warm supervisor started ahead, each to be handed one process (a node agent)."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.lock = threading.Lock()
        self.idle: list[Spare] = []
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
                start_new_session=True,  # as torch starts a worker: its own process group
            )
        except OSError:
            log.exception("could not start a spare")
            ours.close()
            return None
        finally:
            theirs.close()
        return Spare(proc, ours)

    def take(self) -> Spare | None:
        """A ready spare (waiting for one still importing), or None."""
        while True:
            with self.lock:
                if not self.idle:
                    return None
                spare = self.idle.pop(0)
            if spare.wait_ready(READY_WAIT_S):
                return spare
            spare.discard()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
            self.closed = True
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


def ready_and_receive() -> list[str] | None:
    """The spare's side (call it once its imports are done): say it is ready, wait for its
    process, and take it over: descriptors 0, 1 and 2, the cwd, the whole environment (ours is
    cleared) and `sys.orig_argv`. Its argv, or None when the spare was let go unused."""
    fd = int(os.environ.pop(SPARE_FD_ENV))
    sock = socket.socket(fileno=fd)
    try:
        sock.sendall(READY_BYTE)
        got = receive(sock)
    except OSError:
        got = None
    finally:
        sock.close()
    if got is None:
        return None
    return take_over(*got)


def rank_command(python: str) -> list[str]:
    """The command torch's agent runs for a rank (grader.inside.supervisor), and a spare's own."""
    return [python, "-u", "-m", "grader.harness", "main.py"]


class SpareServer:
    """Where the agent's ranks come from: the agent starts each rank as inside/rank_shim.py
    (`entry_args`), which connects here; the zygote (grader.inside.zygote) forks the rank, and
    the shim waits for it, passes the agent's signals on and ends as it ends. A public way in (the
    agent's entrypoint and arguments), so torch's own process handling (environment, log files,
    restarts, stops) is untouched."""

    def __init__(self, zygote: Zygote) -> None:
        self.zygote = zygote
        self.dir = tempfile.mkdtemp(prefix=".rdv-spares-")
        self.path = os.path.join(self.dir, "s")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def served(self) -> int:
        return self.zygote.served

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
            got = receive(conn)
            if got is None:
                return
            message, fds = got
            rank = None
            try:
                if list(message.argv[1:4]) == rank_command(sys.executable)[1:4]:
                    rank = self.zygote.fork_rank(message, (fds[0], fds[1], fds[2]))
                conn.sendall(SERVED if rank is not None else COLD)
            except OSError:
                if rank is not None:  # the shim is gone: so is its rank
                    rank.signal(signal.SIGKILL)
            finally:
                close_all(fds)
            if rank is not None:
                self._watch(conn, rank)

    def _watch(self, conn: socket.socket, rank: ForkedRank) -> None:
        """Pass the shim's signals on to the rank until it ends; then send its exit status."""

        def relay() -> None:
            while True:
                try:
                    got = conn.recv(1)
                except OSError:
                    got = b""
                if not got:  # the shim was killed (SIGKILL to its group): its rank goes too
                    rank.signal(signal.SIGKILL)
                    return
                rank.signal(got[0])

        threading.Thread(target=relay, daemon=True).start()
        status = rank.wait()
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


def serve(zygote: Zygote | None) -> SpareServer | None:
    """A server for the ranks `zygote` forks, or None without one or where its socket cannot be
    made (the ranks start cold)."""
    if zygote is None:
        return None
    try:
        return SpareServer(zygote)
    except OSError:
        log.exception("no spare server: the ranks start cold")
        return None
