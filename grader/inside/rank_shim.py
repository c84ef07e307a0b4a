"""The command torch's elastic agent starts for every rank (inside/spares.py, inside/zygote.py).

`python -I -S rank_shim.py SOCKET PYTHON-ARGS...` stands in for `python PYTHON-ARGS...` (the
rank's real command, `-u -m grader.harness main.py ...`). It imports nothing but the standard
library's socket layer (no `site`, no grader package: a few milliseconds), then:

- connects to the rank server at SOCKET (the agent's own process runs it) and hands over the
  rank's argv, environment and cwd, with its descriptors 0, 1 and 2 (SCM_RIGHTS): the files the
  agent opened for this rank's stdout/stderr, or its own streams with no redirect;
- if the server answers that the zygote forked the rank: waits for the rank's exit status, relays
  the signals the agent sends (SIGTERM and SIGINT at a stop or restart; a SIGKILL kills the shim,
  whose closed socket makes the server kill the rank's process group) and ends as the rank did:
  the same exit code, or death by the same signal (the agent sees -SIG as for a spawned rank);
- otherwise (no server, no zygote, a failed hand-over) it becomes the real rank with
  `os.execv`: a cold start, as if torch had started it itself.
"""

import json
import os
import signal
import socket
import struct
import sys

SERVED = b"S"
COLD = b"C"
STATUS = struct.Struct(">i")  # the rank's exit status as Popen.returncode: -N for signal N
# The signals the agent (or a stop) sends a worker's process group; passed on to the rank's.
RELAYED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)


def _exec_cold(argv: list[str]) -> None:
    os.execv(argv[0], argv)


def _ask(path: str, argv: list[str]) -> socket.socket | None:
    """The connection to the rank server once the zygote forked the rank, else None."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        message = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
        socket.send_fds(sock, [len(message).to_bytes(8, "big")], [0, 1, 2])
        sock.sendall(message)
        if sock.recv(1) == SERVED:
            return sock
        sock.close()
    except OSError:
        pass
    return None


def _relay(sock: socket.socket) -> int:
    """Pass the agent's signals on until the rank's status arrives; that status."""

    def forward(signum: int, _frame: object) -> None:
        try:  # noqa: SIM105 (contextlib is one import more at every rank's start)
            sock.send(bytes([signum]))
        except OSError:
            pass

    for sig in RELAYED:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, RELAYED)
    got = b""
    while len(got) < STATUS.size:
        try:
            chunk = sock.recv(STATUS.size - len(got))
        except InterruptedError:
            continue
        if not chunk:
            return 1  # the server went away: the supervisor is ending the job
        got += chunk
    (status,) = STATUS.unpack(got)
    return int(status)


def _end_as(status: int) -> None:
    sys.stdout.flush()
    if status < 0:
        for sig in RELAYED:
            signal.signal(sig, signal.SIG_DFL)
        if -status not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        status = 128 - status
    os._exit(status & 0xFF)


def main() -> None:
    path, argv = sys.argv[1], [sys.executable, *sys.argv[2:]]
    # A signal that comes while the rank is being handed over waits: to the rank once the zygote
    # forked it, or to the shim itself (default action) before it becomes the rank cold.
    signal.pthread_sigmask(signal.SIG_BLOCK, RELAYED)
    sock = _ask(path, argv)
    if sock is None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, RELAYED)
        _exec_cold(argv)
    else:
        _end_as(_relay(sock))


if __name__ == "__main__":
    main()
