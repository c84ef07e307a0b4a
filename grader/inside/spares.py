"""How ranks and node agents reach their code without an interpreter start each.

torch's elastic agent starts each rank through its own process handling, with inside/rank_shim.py
as the command (`SpareServer.entry_args`): a bare interpreter that connects to this process's
`SpareServer` and hands over the rank's argv, environment, cwd and descriptors 0, 1, 2
(SCM_RIGHTS). The zygote (grader.inside.zygote) forks the rank with them; the shim, which the
agent holds, relays the agent's signals to the rank's process group and ends as the rank ended
(its exit code, or death by its signal). A rank the zygote cannot serve (none, it died, an
unexpected command) is the shim's own `execv` of the real command: a cold start.

A simulated multi-node job's node agents (grader.inside.multinode) start the same way: the
supervisor runs each node's command through the shim, and its zygote forks the agent, which forks
a zygote of its own for its ranks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path

from grader.inside import zygote as zygote_mod
from grader.inside.rank_shim import COLD, SERVED, STATUS
from grader.inside.zygote import NODE_MODULE, ForkedRank, Zygote, close_all, receive

log = logging.getLogger(__name__)

# The agent's per-rank command when a zygote forks the ranks: `python -I -S SHIM SOCKET ARGS...`.
SHIM = str(Path(__file__).with_name("rank_shim.py"))


def rank_command(python: str) -> list[str]:
    """The command torch's agent runs for a rank (grader.inside.supervisor)."""
    return [python, "-u", "-m", "grader.harness", "main.py"]


def node_command(python: str) -> list[str]:
    """A simulated multi-node job's node agent, before its spec path (grader.inside.multinode)."""
    return [python, "-u", "-m", NODE_MODULE]


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
                kind = list(message.argv[1:4])
                is_rank = kind == rank_command(sys.executable)[1:4]
                is_node = kind == node_command(sys.executable)[1:4]
                is_node = is_node and zygote_mod.RUN_NODE is not None  # multinode imported
                if is_rank or is_node:
                    rank = self.zygote.fork_rank(message, (fds[0], fds[1], fds[2]), is_rank)
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
