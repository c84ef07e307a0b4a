"""Hostile learner programs (lesson 2's exercise), shared by the sandbox containment tests
(tests/grader/test_containment.py, bwrap) and `make scale-test` (tests/scale, the Docker sandbox
behind the real HTTP API). Each is the learner's whole `main.py`."""

from __future__ import annotations

import textwrap

NETWORK = textwrap.dedent(
    """
    import socket
    for host, port in [("127.0.0.1", 5432), ("1.1.1.1", 443)]:
        try:
            socket.create_connection((host, port), timeout=3).close()
            print(f"NET {host}:{port} connected", flush=True)
        except OSError as exc:
            print(f"NET {host}:{port} {type(exc).__name__}", flush=True)
    """
)


def host_files(repo: str) -> str:
    return textwrap.dedent(
        f"""
        import os
        try:
            open("/etc/shadow").read()
            print("FILES shadow read", flush=True)
        except OSError as exc:
            print("FILES shadow", type(exc).__name__, flush=True)
        print("FILES git", os.path.exists("{repo}/.git"), flush=True)
        print("FILES root", sorted(os.listdir("/root")), flush=True)
        """
    )


ENVIRONMENT = textwrap.dedent(
    """
    import os
    print("ENV", dict(os.environ), flush=True)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                print("ENV", pid, open(f"/proc/{pid}/environ", "rb").read(), flush=True)
            except OSError as exc:
                print("ENV", pid, type(exc).__name__, flush=True)
    """
)

FORK_BOMB = textwrap.dedent(
    """
    import os
    while True:
        try:
            os.fork()
        except OSError:
            pass
    """
)

MEMORY_BOMB = textwrap.dedent(
    """
    chunks = []
    while True:
        chunks.append(b"x" * (64 << 20))
    """
)

ENDLESS_LOOP = textwrap.dedent(
    """
    import time
    print("LOOPING", flush=True)
    while True:
        time.sleep(0.01)
    """
)

OUTPUT_FLOOD = textwrap.dedent(
    """
    import sys
    for i in range(300_000):
        sys.stdout.write(f"flood {i} " + "y" * 200 + "\\n")
    """
)


def daemon(marker: str) -> str:
    return textwrap.dedent(
        f"""
        import os, sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c",
                         "import time\\nwhile True: time.sleep(1)", "{marker}"])
            os._exit(0)
        print("daemon started", flush=True)
        """
    )


KILL_SUPERVISOR = textwrap.dedent(
    """
    import os, signal
    os.kill(os.getppid(), signal.SIGKILL)
    os.kill(1, signal.SIGKILL)
    os.kill(-1, signal.SIGKILL)
    """
)

FILL_DISK = textwrap.dedent(
    """
    import os, tempfile
    for where in (".", tempfile.gettempdir()):
        i = 0
        while True:
            try:
                with open(os.path.join(where, f"fill{os.getpid()}-{i}"), "wb") as f:
                    f.write(b"z" * (4 << 20))
            except OSError as exc:
                print("DISK full", where, exc.errno, flush=True)
                break
            i += 1
    """
)

HOSTILE_BYTES = "print('\\x00\\x1b[2J\\udcff not utf-8', flush=True)\n"

SIGNALS = textwrap.dedent(
    """
    import os, signal, time
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP, signal.SIGQUIT):
        try:
            os.kill(1, sig)
        except OSError:
            pass
        time.sleep(0.2)
    """
)

SUPERVISOR_MEMORY = textwrap.dedent(
    """
    for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/maps"):
        try:
            open(path, "rb").read(1)
            print("PROC", path, "readable", flush=True)
        except OSError as exc:
            print("PROC", path, type(exc).__name__, flush=True)
    """
)
