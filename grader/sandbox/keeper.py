"""A warm pool's keeper: what its prepared sandboxes leave on the host is removed even when the
process that owns the pool is SIGKILLed (or its whole process group is).

The pool starts one keeper process (grader/sandbox/_keeper.py, stdlib only) in a session of its
own, its stdin a pipe from the owner. Each prepared sandbox is registered while it exists
(`keep`: process group, cgroup dirs, work dir and its mount, or the containers and volumes of
the Docker backend) and dropped when its owner tore it down (`drop`). The pipe's end, by
`close()` or by the owner's death, tells the keeper to remove what is still registered and exit.
bwrap itself also dies with its owner (--die-with-parent and the exec wrapper's parent-death
signal, grader.sandbox.bwrap): the keeper is the backstop for what no signal removes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

from grader.sandbox._keeper import Leftovers, Order

log = logging.getLogger(__name__)

KEEPER_SCRIPT = Path(__file__).with_name("_keeper.py")


class Keeper:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-I", "-B", str(KEEPER_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=None,  # its rare complaints go where the owner's go
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )

    def _send(self, order: Order) -> None:
        with self.lock:
            if self.proc is None or self.proc.stdin is None:
                return
            try:
                self.proc.stdin.write(order.to_line())
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                log.warning("the sandbox keeper is gone: a SIGKILL now would leave sandboxes")

    def keep(self, ident: str, leftovers: Leftovers) -> None:
        self._send(Order(ident, leftovers))

    def drop(self, ident: str) -> None:
        self._send(Order(ident))

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def close(self) -> None:
        """End the keeper (what is still registered is removed by it)."""
        with self.lock:
            proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            log.warning("the sandbox keeper (pid %s) did not end", proc.pid)
            with contextlib.suppress(OSError):
                os.kill(proc.pid, 9)
