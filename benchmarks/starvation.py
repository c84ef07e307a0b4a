"""The attacks that used to starve the admission limit, each a bounded load run against a real
server on loopback (uvicorn, PostgreSQL, the default 15 slots), printing what other learners saw
meanwhile: the p50/p99 of their requests (`/api/v1/me`, `/api/v1/courses`, `/healthz`) and how
many were not 200. Each attack runs `--seconds` and stops by itself; nothing leaves 127.0.0.1.

1. slow_bodies: 30 POSTs at a time, made-up tokens, announcing 1000 bytes and sending 9; each
   answered 408 after the body deadline (or 429 beyond the address's cap) is opened again.
2. slow_model: two learners keep 16 coach questions waiting on a model that takes 8 s.
3. slow_mail: registrations in a loop, 16 at a time, each mailing through a relay that never
   answers (the registration limit refuses most with 429 after 20: the attack still runs).

Wanted: every request of the other learners answered 200, p99 under one second.

    python -m benchmarks starvation [--pg=postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
                                    [--seconds=10] [--port=8766]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Awaitable, Callable

import httpx

from benchmarks.api_load import _option, _percentiles, fresh_database, served, sign_up
from tests.api.served import SilentRelay
from tests.coach.fake_llm import FakeModel

OTHERS = 3  # learners using the site normally during each attack
QUESTION = {
    "question": "Why does every rank see the same samples?",
    "lesson_id": "ddp-fundamentals",
}

Attack = Callable[[str, float], Awaitable[int]]


async def others(base: str, tokens: list[dict[str, str]], until: float) -> tuple[list[float], int]:
    """The other learners, one request after another until `until`: latencies, non-200s."""
    latencies: list[float] = []
    failed = 0

    async def learner(headers: dict[str, str]) -> None:
        nonlocal failed
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            while time.monotonic() < until:
                for path in ("/api/v1/me", "/api/v1/courses", "/healthz"):
                    started = time.monotonic()
                    response = await http.get(path, headers=headers)
                    latencies.append(time.monotonic() - started)
                    failed += response.status_code != 200
                await asyncio.sleep(0.05)

    await asyncio.gather(*(learner(headers) for headers in tokens))
    return latencies, failed


async def slow_bodies(base: str, seconds: float) -> int:
    host, port = base.removeprefix("http://").split(":")
    until = time.monotonic() + seconds
    opened = 0

    async def attacker(number: int) -> None:
        nonlocal opened
        while time.monotonic() < until:
            reader, writer = await asyncio.open_connection(host, int(port))
            opened += 1
            writer.write(
                b"POST /api/v1/auth/token HTTP/1.1\r\n"
                + f"Host: {host}\r\nAuthorization: Bearer made-up-{number}\r\n".encode()
                + b"Content-Type: application/x-www-form-urlencoded\r\n"
                + b"Content-Length: 1000\r\n\r\nusername="
            )
            await writer.drain()
            with contextlib.suppress(TimeoutError, ConnectionError):
                await asyncio.wait_for(reader.read(1), max(0.1, until - time.monotonic()))
            writer.close()

    await asyncio.gather(*(attacker(number) for number in range(30)))
    return opened


def slow_model_attack(model: FakeModel) -> Attack:
    async def slow_model(base: str, seconds: float) -> int:
        until = time.monotonic() + seconds
        asked = 0
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            askers = [(await _learners(http, 1))[0] for _ in range(2)]

            async def ask(headers: dict[str, str]) -> None:
                nonlocal asked
                while time.monotonic() < until:
                    await http.post("/api/v1/coach", json=QUESTION, headers=headers)
                    asked += 1

            await asyncio.gather(*(ask(askers[i % 2]) for i in range(16)))
        return asked

    return slow_model


async def slow_mail(base: str, seconds: float) -> int:
    until = time.monotonic() + seconds
    sent = 0
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:

        async def register() -> None:
            nonlocal sent
            while time.monotonic() < until:
                email = f"mail-{uuid.uuid4().hex[:10]}@example.org"
                await http.post(
                    "/api/v1/auth/register",
                    json={"email": email, "password": "violet kettle sunrise", "display_name": "M"},
                )
                sent += 1

        await asyncio.gather(*(register() for _ in range(16)))
    return sent


async def _learners(http: httpx.AsyncClient, count: int) -> list[dict[str, str]]:
    return [
        (await sign_up(http, f"bench-{uuid.uuid4().hex[:10]}@example.org", 1))[0]
        for _ in range(count)
    ]


async def run(base: str, name: str, attack: Attack, seconds: float) -> bool:
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        tokens = await _learners(http, OTHERS)
    until = time.monotonic() + seconds
    (latencies, failed), attempts = await asyncio.gather(
        others(base, tokens, until), attack(base, seconds)
    )
    p50, p99 = _percentiles(latencies)
    load = os.getloadavg()
    print(
        f"{name}: {attempts} attacking requests; others: {len(latencies)} requests, "
        f"{failed} not 200, p50 {p50:.0f} ms, p99 {p99:.0f} ms (load {load[0]:.2f} {load[1]:.2f})"
    )
    return failed == 0 and p99 < 1000


def main(argv: list[str]) -> int:
    admin = _option(argv, "pg", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    seconds = float(_option(argv, "seconds", "10"))
    port = int(_option(argv, "port", "8766"))
    model = FakeModel(mode="slow", delay_s=8.0).start()
    relay = SilentRelay()
    env = {
        "RDV_COACH_URL": model.url,
        "RDV_COACH_TIMEOUT_SECONDS": "30",
        "RDV_SMTP_HOST": "127.0.0.1",
        "RDV_SMTP_PORT": str(relay.port),
    }
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    ok = True
    try:
        with fresh_database(admin) as url:
            from app.migrate import upgrade

            upgrade(url)
            with served(url, port, env) as base:
                attacks: list[tuple[str, Attack]] = [
                    ("slow_bodies", slow_bodies),
                    ("slow_model", slow_model_attack(model)),
                    ("slow_mail", slow_mail),
                ]
                for name, attack in attacks:
                    ok = asyncio.run(run(base, name, attack, seconds)) and ok
    finally:
        model.stop()
        relay.close()
    print("starvation:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
