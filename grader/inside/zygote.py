"""Ranks forked from one interpreter that imported what every rank imports (a zygote).

A rank costs what it imports before the learner's first line: torch, torch._dynamo (a DDP
program's constructor and every optimizer step import it) and the harness's hooks, about 2.8
CPU-seconds on a 2-core machine, for every rank of every launch. The supervisor imports them
once (`without_gc`), forks one zygote before it starts a thread or reads its job, and the zygote
forks each rank: a rank starts in milliseconds and costs the pages it writes. A simulated
multi-node job's node agents are forked the same way, and each forks a zygote of its own.

How a rank gets here: torch's elastic agent starts each rank as usual, through its own process
handling, with inside/rank_shim.py as the command (`SpareServer.entry_args`, inside/spares.py).
The shim hands its argv, environment, cwd and descriptors 0, 1, 2 to the supervisor's
`SpareServer`, which passes them on to the zygote with one end of a fresh socket pair
(`Zygote.fork_rank`). The zygote forks; the child leads a new session (as torch's spawned ranks
do), says its pid on that socket, takes the descriptors, cwd, environment (its own is cleared) and
argv over, and runs the harness's rank entrypoint (grader.harness.__main__.main). The zygote reaps
it and writes its exit status on the same socket; the server relays it to the shim, which ends as
the rank ended. A rank the zygote cannot serve (none, it died, an unexpected command) is the
shim's own `execv` of the real command: a cold start.

What a forked rank shares with its siblings, unlike torchrun's spawned ranks: the str hash seed
(drawn once per launch, when the supervisor starts; a set of strings iterates in the same order on
every rank of one launch). What is drawn again in each rank: the `random` module's state (Python
does at fork), numpy's global generator, torch's default seed. The zygote holds nothing of the
job: it is forked before the supervisor reads its config (the nonce never reaches a rank).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import logging
import os
import pkgutil
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

from grader.launch.wire import SpareHandover

log = logging.getLogger(__name__)

PID = struct.Struct(">ci")  # b"P" + the rank's pid (from the rank), b"X" + its exit status
# How long the server waits for a forked rank to say its pid.
FORK_WAIT_S = 30.0
REAP_EVERY_S = 0.05
PR_SET_DUMPABLE = 4


# Imported by every DDP program on its first DistributedDataParallel(...) (the constructor asks
# torch._dynamo about compiled DDP) and by every optimizer's first step: ~800 modules, sympy among
# them. The environment they read at import is the sandbox's own, which the rank inherits
# unchanged (tests/grader/test_warm_fidelity.py holds both to it).
AHEAD = ("torch._dynamo",)


# While the zygote's process imports, `torch.cuda.is_available()` asks NVML, not the CUDA
# driver: a driver initialised before a fork is unusable in the forked ranks (GPU workers).
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def preload() -> None:
    """What `install_all` imports in every rank (torch among it), without installing anything,
    and what a DDP program imports anyway (AHEAD)."""
    added = NVML_CHECK not in os.environ
    if added:
        os.environ[NVML_CHECK] = "1"
    try:
        import grader.harness.hooks as hooks

        for name in AHEAD:
            importlib.import_module(name)
        for info in pkgutil.iter_modules(hooks.__path__):
            if not info.name.startswith("_"):
                try:
                    importlib.import_module(f"{hooks.__name__}.{info.name}")
                except Exception:  # the rank's own install_all records it
                    continue
    finally:
        if added:
            os.environ.pop(NVML_CHECK, None)


@contextlib.contextmanager
def without_gc() -> Iterator[None]:
    """Around the imports ahead of a fork: no cyclic collection while ~1M objects are created
    (import torch and torch._dynamo took 3.0 CPU-s with it, 2.1 without, on 2 cores), and every
    object made by then frozen (`gc.freeze`), so that no collection in the zygote or a rank walks
    them again and copies their pages. A forked rank's `gc.get_freeze_count()` is not 0."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def fork_zygote() -> Zygote | None:
    """Fork the zygote (call after `preload`, before this process starts a thread or reads its
    job); None where it cannot serve ranks (ranks then start cold)."""
    if threading.active_count() > 1:
        log.warning("a thread is running: no zygote (each rank starts cold)")
        return None
    if _cuda_started():
        log.warning("CUDA was initialised before the fork: no zygote (each rank starts cold)")
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError:  # out of processes (the sandbox's pids limit): the ranks start cold
        log.warning("could not fork a zygote: each rank starts cold", exc_info=True)
        ours.close()
        theirs.close()
        return None
    if pid == 0:
        ours.close()
        _zygote_main(theirs)
    theirs.close()
    return Zygote(pid, ours)


def _cuda_started() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return True


class ForkedRank:
    """One rank the zygote forked: its pid (it leads its own process group) and its status."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def wait(self) -> int:
        """The rank's exit status as Popen.returncode (-N: killed by signal N)."""
        got = _recv(self.sock, PID.size)
        with contextlib.suppress(OSError):
            self.sock.close()
        if got is None:  # the zygote is gone: so must the rank be
            self.signal(signal.SIGKILL)
            return -signal.SIGKILL
        _tag, status = PID.unpack(got)
        return int(status)


class Zygote:
    """The supervisor's (or a node agent's) handle on its zygote."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self.lock = threading.Lock()
        self.served = 0

    def fork_rank(
        self, message: SpareHandover, fds: tuple[int, int, int], rank: bool = True
    ) -> ForkedRank | None:
        """A rank (or, with `rank` False, a node agent: its argv says which) forked with this
        argv, environment, cwd and descriptors 0, 1 and 2; None when the zygote could not (the
        caller starts the process cold). `served` counts the ranks."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        data = message.to_json().encode()
        try:
            with self.lock:
                socket.send_fds(self.sock, [len(data).to_bytes(8, "big")], [*fds, theirs.fileno()])
                self.sock.sendall(data)
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        ours.settimeout(FORK_WAIT_S)
        got = _recv(ours, PID.size)
        ours.settimeout(None)
        if got is None or got[:1] != b"P":
            ours.close()
            return None
        if rank:
            with self.lock:
                self.served += 1
        return ForkedRank(PID.unpack(got)[1], ours)

    def close(self) -> None:
        """The zygote ends once the ranks it forked have (they are the supervisor's to stop)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()


def _recv(sock: socket.socket, size: int) -> bytes | None:
    got = b""
    while len(got) < size:
        try:
            chunk = sock.recv(size - len(got))
        except InterruptedError:
            continue
        except OSError:
            return None
        if not chunk:
            return None
        got += chunk
    return got


def _recv_exactly(sock: socket.socket, size: int, got: bytes = b"") -> bytes:
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        if not chunk:
            raise EOFError("the other side closed the socket")
        got += chunk
    return got


def receive(sock: socket.socket, nfds: int = 3) -> tuple[SpareHandover, list[int]] | None:
    """One hand-over (the rank shim's to the server, or the server's to the zygote) and its
    `nfds` descriptors; None for anything else (a closed socket, a damaged message, another
    number of descriptors)."""
    fds: list[int] = []
    try:
        head, fds, _flags, _addr = socket.recv_fds(sock, 8, nfds)
        if not head:
            close_all(fds)
            return None
        head = _recv_exactly(sock, 8, head)
        message = SpareHandover.from_json(_recv_exactly(sock, int.from_bytes(head, "big")))
    except (OSError, EOFError, ValueError):  # WireError is a ValueError
        close_all(fds)
        return None
    if len(fds) != nfds:
        close_all(fds)
        return None
    return message, fds


def take_over(message: SpareHandover, fds: list[int]) -> list[str]:
    """Become the process a hand-over describes: its descriptors 0, 1 and 2 (`fds`, closed after),
    its cwd, its whole environment (ours is cleared) and `sys.orig_argv`. Its argv."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(message.cwd)
    os.environ.clear()
    os.environ.update(message.env)
    argv = list(message.argv)
    sys.orig_argv[:] = argv
    return argv


def close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


# -- the zygote's side (one thread: it forks) ------------------------------------------------
def _zygote_main(control: socket.socket) -> NoReturn:
    code = 0
    try:
        _quiet_descriptors(keep=control.fileno())
        _serve(control)  # returns only in a forked rank
    except BaseException:
        code = 1
    os._exit(code)


def _quiet_descriptors(keep: int) -> None:
    """Nothing of the supervisor's: its stdout is the host's frame channel (a zygote holding it
    open would keep the host from seeing its end), its other files are its own."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.closerange(3, keep)
    os.closerange(keep + 1, _max_fd())


def _max_fd() -> int:
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return 1024


def _serve(control: socket.socket) -> None:
    children: dict[int, socket.socket] = {}
    open_ = True
    while open_ or children:
        readable: list[socket.socket] = []
        if open_:  # with no rank to reap, it sleeps until the next request (an idle sandbox)
            wait = REAP_EVERY_S if children else None
            readable, _, _ = select.select([control], [], [], wait)
        else:
            time.sleep(REAP_EVERY_S)
        _reap(children)
        if not readable:
            continue
        got = receive(control, 4)
        if got is None:  # the supervisor closed us: end once our ranks have
            open_ = False
            continue
        message, fds = got
        try:
            pid = os.fork()
        except OSError:  # out of processes: the server answers "cold", the shim execs the rank
            close_all(fds)
            continue
        if pid == 0:
            control.close()
            for other in children.values():
                other.close()
            _become_rank(message, fds)
        close_all(fds[:3])
        children[pid] = socket.socket(fileno=fds[3])
    os._exit(0)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock = children.pop(pid, None)
        if sock is None:
            continue
        with contextlib.suppress(OSError):  # -N for death by signal N, as Popen.returncode
            sock.sendall(PID.pack(b"X", os.waitstatus_to_exitcode(status)))
        with contextlib.suppress(OSError):
            sock.close()


def _become_rank(message: SpareHandover, fds: list[int]) -> NoReturn:
    """In the forked child: become the rank torch's agent started, then run it."""
    code = 1
    try:
        os.setsid()  # as torch starts a rank: its own session and process group
        reply = socket.socket(fileno=fds[3])
        reply.sendall(PID.pack(b"P", os.getpid()))
        reply.close()
        argv = take_over(message, fds[:3])
        _fresh_process_state()
        code = (RUN_NODE if RUN_NODE is not None and NODE_MODULE in argv else RUN_RANK)(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(code)


def run_harness(argv: list[str]) -> int:
    """A rank's command (`python -u -m grader.harness main.py ARGS...`) in this process: the
    harness's entrypoint with its arguments."""
    from grader.harness.__main__ import main

    return main(argv[argv.index("grader.harness") + 1 :])


# What a forked rank runs, given its full argv (tests swap it for a plain runpy of the file).
RUN_RANK: Callable[[list[str]], int] = run_harness

# A simulated multi-node job's node agent (`python -u -m grader.inside.multinode SPEC.json`).
NODE_MODULE = "grader.inside.multinode"


# What a forked node agent runs, given its full argv: grader.inside.multinode sets it when it is
# imported, which the supervisor does before it forks the zygote (None: node agents start cold).
RUN_NODE: Callable[[list[str]], int] | None = None


def _fresh_process_state() -> None:
    """What a spawned interpreter draws for itself (Python reseeds `random` at fork), and what
    exec would have reset: dumpable again (the supervisor made itself undumpable)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        with contextlib.suppress(Exception):
            numpy.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
