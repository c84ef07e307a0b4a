"""Limits under load, without timing: an exhausted pool answers 503 with Retry-After at once;
one caller's requests and streams beyond its caps get 429; others are not held up."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session
from starlette.types import Receive, Scope, Send

from app.db import get_session, make_engine
from app.limits import RequestLimits
from tests.auth.factories import register_and_sign_in


def test_an_exhausted_pool_answers_503_with_retry_after(
    app: FastAPI, client: TestClient, migrated_urls: dict[str, str], db_backend: str
) -> None:
    auth = register_and_sign_in(client)
    tiny = make_engine(migrated_urls[db_backend], pool_size=1, max_overflow=0, pool_timeout=0.1)
    held = tiny.connect()  # the only connection, busy elsewhere

    def from_tiny_pool() -> Iterator[Session]:
        with Session(tiny) as session:
            yield session

    app.dependency_overrides[get_session] = from_tiny_pool
    try:
        response = client.get("/api/v1/me", headers=auth)
    finally:
        held.close()
        tiny.dispose()
    assert response.status_code == 503
    assert response.json()["code"] == "busy"
    assert int(response.headers["retry-after"]) > 0


class _Gate:
    """An ASGI app whose requests wait until released; counts how many got in."""

    def __init__(self) -> None:
        self.entered = 0
        self.release = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.entered += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@pytest.mark.parametrize(
    ("path", "cap"),
    [("/api/v1/me", 3), ("/api/v1/progress/events", 3), ("/api/v1/submissions/x/events", 2)],
)
def test_one_caller_beyond_its_cap_gets_429_and_others_still_get_in(path: str, cap: int) -> None:
    gate = _Gate()
    limits = RequestLimits(gate, per_caller=3, streams_per_caller=2, admitted=10, wait_s=5)
    app = _with_state(limits)

    async def scenario() -> tuple[list[int], int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            greedy = {"Authorization": "Bearer rdv_greedy"}
            burst = [asyncio.create_task(http.get(path, headers=greedy)) for _ in range(10)]
            while gate.entered < cap:
                await asyncio.sleep(0.01)
            other = asyncio.create_task(http.get(path, headers={"Authorization": "Bearer rdv_b"}))
            while gate.entered < cap + 1:  # the other caller got in while the burst was held
                await asyncio.sleep(0.01)
            gate.release.set()
            statuses = [r.status_code for r in await asyncio.gather(*burst)]
            return statuses, (await other).status_code

    statuses, other_status = _run(scenario())
    assert sorted(statuses) == [200] * cap + [429] * (10 - cap)
    assert other_status == 200


def _with_state(inner: RequestLimits):  # type: ignore[no-untyped-def]
    """The error pages read the app's settings; a bare middleware has none, so give it some."""
    from app.config import Settings

    state_app = FastAPI()
    state_app.state.settings = Settings()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = state_app
        await inner(scope, receive, send)

    return app
