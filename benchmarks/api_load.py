"""The API under load, served for real (uvicorn, PostgreSQL, one process as `python -m app serve`):

1. burst: 100 simultaneous `GET /api/v1/me` from one learner while another learner asks once.
   Wanted: no 5xx in the burst (the caller's cap answers 429), the other learner under 2 s.
2. alone: one client syncing 200 times in a row: a sync's own time, with no queue (the floor
   under the figures of 3; read them against it).
3. sync: 50 clients (10 learners x 2 devices, each device with 2 or 3 tabs) syncing progress for
   15 s, resending some batches as a flaky network would. Wanted: no 5xx, every acknowledged
   event stored exactly once; p50/p99 of a sync printed. The clients never pause, so a sync's
   time there is mostly its wait behind the others: about clients / throughput (Little's law).

    python -m benchmarks api_load [--pg=postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
                                  [--seconds=15] [--port=8765]

A fresh database is created for the run and dropped after it. Figures are wall-clock on this
machine: read them beside its load average (printed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
LESSON = "ddp-fundamentals"
STEPS = ("meet-ddp", "one-process-per-gpu", "rank-and-world-size", "init-process-group")
PASSWORD = "violet kettle sunrise"


def _option(argv: list[str], name: str, default: str) -> str:
    prefix = f"--{name}="
    return next((a[len(prefix) :] for a in argv if a.startswith(prefix)), default)


@contextlib.contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    name = f"rdv_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextlib.contextmanager
def served(
    database_url: str,
    port: int,
    extra_env: Mapping[str, str] | None = None,
    *,
    cwd: Path = ROOT,
    command: list[str] | None = None,
) -> Iterator[str]:
    """`python -m app serve` (or `command`, arguments to the interpreter ending in `serve`) in
    the checkout `cwd`, until the block ends."""
    env = {
        **os.environ,
        "RDV_DATABASE_URL": database_url,
        "RDV_GRADING_AUTOSTART": "false",
        "RDV_ENVIRONMENT": "development",
        **(extra_env or {}),
    }
    with tempfile.TemporaryFile() as log:  # the server's log, shown if it fails to start
        server = subprocess.Popen(
            [sys.executable, *(command or ["-m", "app", "serve"]), "--port", str(port)],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{base}/api/v1/courses", timeout=1).status_code == 200:
                        break
                time.sleep(0.1)
            else:
                log.seek(0)
                raise RuntimeError("the server did not start:\n" + log.read().decode()[-4000:])
            yield base
        finally:
            server.terminate()
            server.wait(timeout=30)
            log.seek(0)
            errors = [line for line in log.read().decode().splitlines() if "ERROR" in line]
            print(f"server: {len(errors)} error lines in its log", *errors[:5], sep="\n  ")


async def sign_up(http: httpx.AsyncClient, email: str, devices: int) -> list[dict[str, str]]:
    created = await http.post(
        "/api/v1/auth/register",
        json={"email": email, "password": PASSWORD, "display_name": "Bench"},
    )
    created.raise_for_status()
    tokens = []
    for index in range(devices):
        issued = await http.post(
            "/api/v1/auth/token",
            data={"username": email, "password": PASSWORD, "device_name": f"device {index}"},
        )
        issued.raise_for_status()
        tokens.append({"Authorization": f"Bearer {issued.json()['access_token']}"})
    return tokens


async def burst(base: str) -> bool:
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        greedy = (await sign_up(http, "greedy@example.org", 1))[0]
        other = (await sign_up(http, "patient@example.org", 1))[0]
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as http:
        flood = [asyncio.create_task(http.get("/api/v1/me", headers=greedy)) for _ in range(100)]
        await asyncio.sleep(0)  # the burst is on its way first
        started = time.perf_counter()
        answer = await http.get("/api/v1/me", headers=other)
        other_s = time.perf_counter() - started
        statuses = [r.status_code for r in await asyncio.gather(*flood)]
    tally = {status: statuses.count(status) for status in sorted(set(statuses))}
    errors = sum(s >= 500 for s in statuses)
    print(f"burst: 100 x GET /me from one learner -> {tally}; 5xx: {errors}")
    print(f"burst: the other learner got {answer.status_code} in {other_s:.3f} s")
    return errors == 0 and answer.status_code == 200 and other_s < 2.0


def _event(rng: random.Random) -> dict[str, object]:
    return {
        "id": uuid.uuid4().hex,
        "type": rng.choice(("step_seen", "position", "step_completed")),
        "lesson_id": LESSON,
        "step_id": rng.choice(STEPS),
        "at": "2026-01-01T10:00:00Z",
    }


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


async def alone(base: str, times: int = 200) -> bool:
    rng = random.Random(1)
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        headers = (await sign_up(http, "alone@example.org", 1))[0]
        latencies = []
        for _ in range(times):
            started = time.perf_counter()
            answer = await http.post(
                "/api/v1/progress/events", json={"events": [_event(rng)]}, headers=headers
            )
            latencies.append(time.perf_counter() - started)
            if answer.status_code != 200:
                print(f"alone: a sync got {answer.status_code}")
                return False
    p50, p99 = _percentiles(latencies)
    print(f"alone: one client, {times} syncs in a row: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    return True


async def sync_clients(base: str, seconds: float, database_url: str) -> bool:
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        learners = [await sign_up(http, f"sync{i}@example.org", 2) for i in range(10)]
    clients: list[tuple[int, dict[str, str]]] = []
    for index, devices in enumerate(learners):
        clients += [(index, devices[0])] * 2 + [(index, devices[1])] * 3  # tabs per device
    acked: list[set[str]] = [set() for _ in learners]
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    deadline = time.perf_counter() + seconds

    async def client(learner: int, headers: dict[str, str], http: httpx.AsyncClient) -> None:
        rng = random.Random()
        previous: list[dict[str, object]] = []
        while time.perf_counter() < deadline:
            if previous and rng.random() < 0.2:
                batch = previous  # the answer was "lost": send the same events again
            else:
                batch = [_event(rng) for _ in range(rng.randint(1, 3))]
            started = time.perf_counter()
            response = await http.post(
                "/api/v1/progress/events", json={"events": batch}, headers=headers
            )
            latencies.append(time.perf_counter() - started)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code == 200:
                acked[learner].update(str(event["id"]) for event in batch)
            previous = batch

    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as http:
        await asyncio.gather(*(client(learner, h, http) for learner, h in clients))

    engine = create_engine(database_url)
    lost = duplicated = 0
    with engine.connect() as conn:
        for index, ids in enumerate(acked):
            email = f"sync{index}@example.org"
            rows = conn.execute(
                text(
                    "SELECT e.client_id FROM progress_events e JOIN users u ON u.id = e.user_id "
                    "WHERE u.email = :email"
                ),
                {"email": email},
            ).scalars()
            stored = list(rows)
            duplicated += len(stored) - len(set(stored))
            lost += len(ids - set(stored))
    engine.dispose()
    p50, p99 = _percentiles(latencies)
    errors = sum(n for status, n in statuses.items() if status >= 500)
    print(
        f"sync: {len(clients)} clients, {len(latencies)} syncs in {seconds:.0f} s, statuses "
        f"{dict(sorted(statuses.items()))}; 5xx: {errors}"
    )
    print(f"sync: acknowledged {sum(map(len, acked))} events; lost {lost}; duplicated {duplicated}")
    print(f"sync: p50 {p50:.1f} ms, p99 {p99:.1f} ms; {len(latencies) / seconds:.0f} syncs/s")
    return errors == 0 and lost == 0 and duplicated == 0


def main(argv: list[str]) -> int:
    admin = _option(argv, "pg", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    seconds = float(_option(argv, "seconds", "15"))
    port = int(_option(argv, "port", "8765"))
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    with fresh_database(admin) as url:
        from app.migrate import upgrade

        upgrade(url)
        with served(url, port) as base:
            ok = asyncio.run(burst(base))
            ok = asyncio.run(alone(base)) and ok
            ok = asyncio.run(sync_clients(base, seconds, url)) and ok
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    print("api_load:", "ok" if ok else "FAILED")
    return 0 if ok else 1
