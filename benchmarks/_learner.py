"""A learner's side of a running server, and what the server's process tree is doing.

For the benchmarks that grade through the API: start `python -m app serve` as `make run` does
(SQLite, the in-process executor, the bwrap sandbox), sign a learner up through the REST API the
mobile app uses, submit a program and follow its live events (SSE) to the verdict; read
/proc to wait until everything under the server is idle and to measure the memory it holds.
Nothing here knows how the grader starts its sandboxes or ranks.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "violet kettle sunrise"
STARTUP_DEADLINE_S = 120.0


# -- Server-Sent Events ------------------------------------------------------------------------
@dataclass(frozen=True)
class SseEvent:
    kind: str
    data: Any
    id: str | None = None


@dataclass
class SseParser:
    """Lines of a text/event-stream in, events out (a blank line ends an event)."""

    _kind: str = "message"
    _data: list[str] = field(default_factory=list)
    _id: str | None = None

    def feed(self, line: str) -> SseEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            if not self._data:
                self._kind, self._id = "message", None
                return None
            raw = "\n".join(self._data)
            try:
                data: Any = json.loads(raw)
            except ValueError:
                data = raw
            event = SseEvent(self._kind, data, self._id)
            self._kind, self._data, self._id = "message", [], None
            return event
        if line.startswith(":"):  # a comment (keep-alive)
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._kind = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None


# -- the server --------------------------------------------------------------------------------
@dataclass
class Server:
    label: str
    base: str
    process: subprocess.Popen[bytes]
    log_path: Path
    # Grader workers beside the web server (the queue backend); empty for the in-process executor.
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def log(self) -> str:
        return self.log_path.read_text("utf-8", errors="replace")

    @property
    def pids(self) -> list[int]:
        """The process trees that grade for this server: the server's own and each worker's."""
        return [self.process.pid, *(w.pid for w in self.workers)]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def served(label: str, extra_env: Mapping[str, str], *, queue_workers: int = 0) -> Iterator[Server]:
    """`python -m app serve` on a free port with a fresh SQLite database, as `make run` serves
    (development settings, the in-process executor, the bwrap sandbox); stopped on exit. With
    `queue_workers`, as the scale stack grades instead: a fresh PostgreSQL database (this
    machine's, RDV_BENCH_PG_ADMIN_URL), the procrastinate queue backend and that many
    `python -m grader.worker --queue cpu` processes, each with its own warm pool."""
    with (
        tempfile.TemporaryDirectory(prefix="rdv-bench-server-") as tmp,
        _database(Path(tmp), postgres=queue_workers > 0) as url,
    ):
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "RDV_ENVIRONMENT": "development",
            "RDV_DATABASE_URL": url,
            "RDV_BASE_URL": base,
            "RDV_GRADING_BACKEND": "procrastinate" if queue_workers else "local",
            "RDV_GRADING_AUTOSTART": "true",
            "RDV_SANDBOX": "bwrap",
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
        log_path = Path(tmp) / "server.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        server = Server(label, base, process, log_path)
        try:
            _wait_answering(server)
            dsn = url.replace("postgresql+psycopg://", "postgresql://", 1)
            for index in range(queue_workers):
                with (Path(tmp) / f"worker-{index}.log").open("wb") as worker_log:
                    server.workers.append(
                        subprocess.Popen(
                            [sys.executable, "-m", "grader.worker", "--queue", "cpu", "--dsn", dsn],
                            cwd=ROOT,
                            env=env,
                            stdout=worker_log,
                            stderr=subprocess.STDOUT,
                        )
                    )
            yield server
        finally:
            for child in (*server.workers, process):
                child.terminate()
            for child in (*server.workers, process):
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            errors = [line for line in server.log().splitlines() if " ERROR " in line]
            print(f"server {label}: {len(errors)} error lines in its log", *errors[:5], sep="\n  ")


PG_ADMIN_URL = os.environ.get(
    "RDV_BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@contextlib.contextmanager
def _database(tmp: Path, *, postgres: bool) -> Iterator[str]:
    """A fresh database URL: SQLite in `tmp`, or a PostgreSQL database dropped afterwards."""
    if not postgres:
        yield f"sqlite:///{tmp / 'bench.db'}"
        return
    import psycopg

    name = f"rdv_bench_{os.getpid()}_{int(time.time())}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield (
            PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
            + f"/{name}"
        )
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _wait_answering(server: Server) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"the server exited:\n{server.log()[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.base}/api/v1/courses", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"the server did not answer:\n{server.log()[-4000:]}")


# -- a learner -----------------------------------------------------------------------------------
async def sign_up(http: httpx.AsyncClient, email: str) -> dict[str, str]:
    """Register through the API, then get a device token (the mobile app's sign-in)."""
    created = await http.post(
        "/api/v1/auth/register",
        json={"email": email, "password": PASSWORD, "display_name": "Bench"},
    )
    created.raise_for_status()
    issued = await http.post(
        "/api/v1/auth/token",
        data={"username": email, "password": PASSWORD, "device_name": "bench"},
    )
    issued.raise_for_status()
    return {"Authorization": f"Bearer {issued.json()['access_token']}"}


@dataclass
class Verdict:
    submission: str | None
    first_output_s: float | None  # POST to the first rank output line on the stream
    verdict_s: float | None  # POST to the `done` event
    status: str  # the submission's status (done | error), or why there is none
    outcome: str | None  # the Result's status (pass | fail | error)


async def submit_and_follow(
    http: httpx.AsyncClient, headers: dict[str, str], exercise: str, code: str
) -> Verdict:
    """Submit as the exercise page does, then follow the submission's live events to `done`."""
    start = time.perf_counter()
    answer = await http.post(
        "/api/v1/submissions", json={"exercise": exercise, "code": code}, headers=headers
    )
    if answer.status_code != 202:
        return Verdict(None, None, None, f"refused {answer.status_code}", None)
    accepted = answer.json()
    first: float | None = None
    parser = SseParser()
    async with http.stream("GET", accepted["events_url"], headers=headers) as stream:
        async for line in stream.aiter_lines():
            event = parser.feed(line)
            if event is None:
                continue
            if event.kind == "output" and first is None:
                first = time.perf_counter() - start
            elif event.kind == "done":
                result = event.data.get("result") or {}
                return Verdict(
                    accepted["id"],
                    first,
                    time.perf_counter() - start,
                    str(event.data.get("status")),
                    result.get("status"),
                )
            elif event.kind == "signed_out":
                break
    return Verdict(accepted["id"], first, None, "stream ended without a verdict", None)


# -- the server's process tree -------------------------------------------------------------------
def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # fields from the 3rd (state) on


def descendants(root: int) -> list[int]:
    """Every process under `root` (not `root` itself), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_cpu_ticks(root: int) -> tuple[int, frozenset[int]]:
    """CPU ticks used by `root` (with its reaped children) and every live process under it."""
    pids = descendants(root)
    ticks = 0
    for pid in [root, *pids]:
        fields = _stat_fields(pid)
        if fields is not None:  # utime, stime, cutime, cstime: fields 14-17
            ticks += sum(int(v) for v in fields[11:15])
    return ticks, frozenset(pids)


def trees_cpu_s(roots: list[int]) -> float:
    """CPU-seconds used so far by the processes under `roots` (see `tree_cpu_ticks`)."""
    return sum(tree_cpu_ticks(root)[0] for root in roots) / os.sysconf("SC_CLK_TCK")


def wait_idle(roots: list[int], quiet_s: float = 2.0, timeout_s: float = 300.0) -> float:
    """Wait until no process under any of `roots` starts, ends or uses more than 5% of a core
    for `quiet_s` (a pool that refills is then full and waiting); returns the seconds waited,
    or -1 when the timeout came first."""
    hz = os.sysconf("SC_CLK_TCK")
    start = time.monotonic()
    quiet_since = start
    before = [tree_cpu_ticks(root) for root in roots]
    while time.monotonic() - start < timeout_s:
        time.sleep(0.25)
        now = [tree_cpu_ticks(root) for root in roots]
        busy = any(
            pids != old_pids or (ticks - old_ticks) / hz > 0.05 * 0.25
            for (ticks, pids), (old_ticks, old_pids) in zip(now, before, strict=True)
        )
        before = now
        if busy:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return time.monotonic() - start - quiet_s
    return -1.0


@dataclass(frozen=True)
class TreeMemory:
    processes: int
    rss_mib: float  # the sum of every process's RSS (shared pages counted in each)
    pss_mib: float | None  # proportional set size (shared pages split); None where unreadable
    names: dict[str, int]  # how many processes of each command name

    def __add__(self, other: TreeMemory) -> TreeMemory:
        pss = (
            None if self.pss_mib is None or other.pss_mib is None else self.pss_mib + other.pss_mib
        )
        names = dict(self.names)
        for name, count in other.names.items():
            names[name] = names.get(name, 0) + count
        return TreeMemory(
            self.processes + other.processes, self.rss_mib + other.rss_mib, pss, names
        )


def tree_memory(root: int) -> TreeMemory:
    """The memory held by the processes under `root` (the server's own is left out)."""
    pids = descendants(root)
    rss = 0
    pss: int | None = 0
    names: dict[str, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            names[name] = names.get(name, 0) + 1
        with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
            rss += next((int(ln.split()[1]) for ln in status if ln.startswith("VmRSS:")), 0)
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                value = next((int(ln.split()[1]) for ln in rollup if ln.startswith("Pss:")), 0)
            pss = None if pss is None else pss + value
        except OSError:
            pss = None
    return TreeMemory(len(pids), rss / 1024, None if pss is None else pss / 1024, names)
