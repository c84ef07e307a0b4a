"""No sandbox outlives its owner: a server (`python -m app serve`, the in-process backend, the
bwrap sandbox) with a FULL warm pool is stopped by SIGTERM, or its whole process group by
SIGKILL, and nothing of its prepared sandboxes remains: no bwrap process (nor anything they
started), no work dir, no mounted work tmpfs, no job cgroup. The Docker half of the same promise
is tests/grader/test_docker_warm.py's (the fake engine; the keeper's cleanup and the reaper).

The server runs with its own temp dir, sandbox state dir and uid range, so what it leaves can be
told apart from what other graders on the machine hold: every process whose command line or
environment names the test's directory belongs to it (bwrap binds its work dir from there; the
keeper inherits its TMPDIR).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]
REPO = Path(__file__).resolve().parents[2]
POOL = 2
SLOTS = 16


def uid_base(tmp: Path) -> int:
    """The server's own sandbox uids, drawn from its directory's name: no other grader (whose
    default base is 3900000) nor a test running beside it uses them."""
    return 4_000_000 + zlib.crc32(tmp.name.encode()) % 10_000 * SLOTS


# Waiting bounds (not timing assertions): a busy 2-core machine starts a server and two
# sandboxes importing torch in well under these.
START_S = 300.0
GONE_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def processes_of(mark: str, uid_base: int) -> dict[int, str]:
    """Processes whose command line or environment names `mark`, or that run as a uid of the
    test's range (everything inside its sandboxes): pid -> command line."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            uid_line = next(
                line
                for line in (entry / "status").read_text().splitlines()
                if line.startswith("Uid:")
            )
            uid = int(uid_line.split()[1])
            environ = (entry / "environ").read_bytes()
            if uid_base <= uid < uid_base + SLOTS or mark in cmdline or mark.encode() in environ:
                found[int(entry.name)] = cmdline
    return found


def pool_full(mark: str, uid_base: int) -> bool:
    """POOL bwrap sandboxes of this server, each with its supervisor and a spare rank
    interpreter started (at least two Pythons of the sandbox's uid under each)."""
    procs = processes_of(mark, uid_base)
    bwraps = [pid for pid, cmd in procs.items() if Path(cmd.split(" ")[0]).name == "bwrap"]
    pythons = [cmd for cmd in procs.values() if "python" in cmd.split(" ")[0]]
    inside = [
        cmd for cmd in pythons if "grader.inside.supervisor" in cmd or "grader.harness" in cmd
    ]
    return len(bwraps) >= POOL and len(inside) >= 2 * POOL


def job_cgroups(server_pid: int) -> list[Path]:
    """The job cgroups a grader of this pid made (grader.sandbox.cgroups names them so)."""
    roots = [Path("/sys/fs/cgroup"), *Path("/sys/fs/cgroup").glob("*")]
    found: list[Path] = []
    for root in roots:
        with contextlib.suppress(OSError):
            found += root.rglob(f"job-{server_pid}-*")
    return found


def leftovers(tmp: Path, state: Path, server_pid: int) -> dict[str, list[str]]:
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    return {
        "processes": sorted(processes_of(str(tmp), uid_base(tmp)).values()),
        "work dirs": sorted(
            str(p) for p in (*(tmp / "temp").glob("rdv-*"), *state.glob("work/slot-*"))
        ),
        "mounts": [line for line in mounts if str(tmp) in line],
        "cgroups": [str(p) for p in job_cgroups(server_pid)],
    }


@contextlib.contextmanager
def serving(tmp: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A server with a full warm pool of POOL bwrap sandboxes, in a process group of its own."""
    port = free_port()
    state = tmp / "state"
    (tmp / "temp").mkdir()
    env = {
        **os.environ,
        "RDV_ENVIRONMENT": "development",
        "RDV_DATABASE_URL": f"sqlite:///{tmp / 'app.db'}",
        "RDV_BASE_URL": f"http://127.0.0.1:{port}",
        "RDV_GRADING_BACKEND": "local",
        "RDV_GRADING_AUTOSTART": "true",
        "RDV_SANDBOX": "bwrap",
        "RDV_WARM_POOL": str(POOL),
        "RDV_SANDBOX_STATE_DIR": str(state),
        "RDV_SANDBOX_UID_BASE": str(uid_base(tmp)),
        "RDV_SANDBOX_SLOTS": str(SLOTS),
        "TMPDIR": str(tmp / "temp"),
        "PYTHONUNBUFFERED": "1",
    }
    log = (tmp / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_S
        answering = False
        while time.monotonic() < deadline and server.poll() is None:
            if not answering:
                with contextlib.suppress(httpx.HTTPError):
                    url = f"http://127.0.0.1:{port}/api/v1/courses"
                    answering = httpx.get(url, timeout=2).status_code == 200
            if answering and pool_full(str(tmp), uid_base(tmp)):
                break
            time.sleep(0.5)
        log_text = (tmp / "server.log").read_text(errors="replace")[-3000:]
        assert answering and pool_full(str(tmp), uid_base(tmp)), f"no full pool:\n{log_text}"
        yield server, state
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        log.close()


def wait_gone(tmp: Path, state: Path, server_pid: int) -> dict[str, list[str]]:
    deadline = time.monotonic() + GONE_S
    left = leftovers(tmp, state, server_pid)
    while any(left.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
        left = leftovers(tmp, state, server_pid)
    return left


@pytest.fixture
def tmp() -> Iterator[Path]:
    """A directory the sandbox's uid can traverse to its work dir (pytest's tmp_path is 0700)."""
    made = Path(tempfile.mkdtemp(prefix="rdv-orphans-", dir="/run" if os.geteuid() == 0 else None))
    made.chmod(0o711)
    try:
        yield made.resolve()
    finally:
        shutil.rmtree(made, ignore_errors=True)


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL of its process group"])
def test_a_stopped_server_leaves_no_sandbox_behind(stop: str, tmp: Path) -> None:
    with serving(tmp) as (server, state):
        before = leftovers(tmp, state, server.pid)
        assert before["processes"] and before["work dirs"], before  # what the pool holds
        if stop == "SIGTERM":
            server.send_signal(signal.SIGTERM)  # uvicorn shuts down; the backend closes its pool
            server.wait(timeout=GONE_S)
        else:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        left = wait_gone(tmp, state, server.pid)
    assert not any(left.values()), left
