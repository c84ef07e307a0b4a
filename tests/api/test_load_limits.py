"""Limits under load, without timing: an exhausted pool answers 503 with Retry-After at once;
one learner's requests and streams beyond their caps get 429, counted across all of the learner's
devices and tokens; others are not held up."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session
from starlette.types import Receive, Scope, Send

from app.auth import service
from app.auth.security import token_digest
from app.db import get_session, make_engine
from app.limits import RequestLimits
from app.main import create_app
from tests.auth.factories import create_token, create_user, register_and_sign_in


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
    """The scenario, failing (not hanging) when requests that should be refused are held."""
    return asyncio.run(asyncio.wait_for(coro, 20))


def _owner_by_token(owners: dict[str, str]):  # type: ignore[no-untyped-def]
    """A learner look-up for the bare middleware: token -> learner, by the token's digest."""
    by_digest = {token_digest(token): learner for token, learner in owners.items()}
    return by_digest.get


def _credential(token: str) -> dict[str, str]:
    """`cookie:<token>` is a browser's session cookie, any other token a bearer token."""
    if token.startswith("cookie:"):
        return {"Cookie": f"rdv_session={token.removeprefix('cookie:')}"}
    return {"Authorization": f"Bearer {token}"}


def _burst(
    limits: RequestLimits, gate: _Gate, path: str, greedy: list[str], other: str, cap: int
) -> tuple[list[int], int]:
    """10 requests spread over the `greedy` tokens, held in the app; then one with `other`."""
    app = _with_state(limits)

    async def scenario() -> tuple[list[int], int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            burst = [
                asyncio.create_task(http.get(path, headers=_credential(greedy[i % len(greedy)])))
                for i in range(10)
            ]
            while gate.entered < cap:
                await asyncio.sleep(0.01)
            while sum(task.done() for task in burst) < 10 - cap:  # the rest were refused
                await asyncio.sleep(0.01)
            late = asyncio.create_task(http.get(path, headers={"Authorization": f"Bearer {other}"}))
            while gate.entered < cap + 1:  # the other learner got in while the burst was held
                await asyncio.sleep(0.01)
            gate.release.set()
            statuses = [r.status_code for r in await asyncio.gather(*burst)]
            return statuses, (await late).status_code

    return _run(scenario())


@pytest.mark.parametrize(
    ("path", "cap"),
    [("/api/v1/me", 3), ("/api/v1/progress/events", 3), ("/api/v1/submissions/x/events", 2)],
)
def test_one_caller_beyond_its_cap_gets_429_and_others_still_get_in(path: str, cap: int) -> None:
    gate = _Gate()
    owners = _owner_by_token({"rdv_greedy": "greedy", "rdv_b": "b"})
    limits = RequestLimits(
        gate, per_caller=3, streams_per_caller=2, admitted=10, wait_s=5, learner_of=owners
    )
    statuses, other_status = _burst(limits, gate, path, ["rdv_greedy"], "rdv_b", cap)
    assert sorted(statuses) == [200] * cap + [429] * (10 - cap)
    assert other_status == 200


@pytest.mark.parametrize(("path", "cap"), [("/api/v1/me", 3), ("/api/v1/submissions/x/events", 2)])
def test_made_up_tokens_count_as_one_anonymous_caller_per_address(path: str, cap: int) -> None:
    """Ten tokens that belong to nobody, from one address, share that address's cap (each used
    to count alone); a real learner's token still gets in."""
    gate = _Gate()
    owners = _owner_by_token({"rdv_real": "real"})
    limits = RequestLimits(
        gate, per_caller=3, streams_per_caller=2, admitted=10, wait_s=5, learner_of=owners
    )
    made_up = [f"rdv_made_up_{i}" for i in range(10)]
    statuses, other_status = _burst(limits, gate, path, made_up, "rdv_real", cap)
    assert sorted(statuses) == [200] * cap + [429] * (10 - cap)
    assert other_status == 200


def test_behind_a_trusted_proxy_anonymous_callers_count_per_client_address() -> None:
    """Through the proxy, each visitor has their own cap; the proxy's own address is not one
    caller for all (the whole site got 429 behind a load balancer)."""
    gate = _Gate()
    limits = RequestLimits(
        gate,
        per_caller=1,
        streams_per_caller=1,
        admitted=10,
        wait_s=5,
        learner_of=lambda _: None,
        trusted_proxies=["127.0.0.1"],
    )
    app = _with_state(limits)

    async def scenario() -> list[int]:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            visitors = [
                asyncio.create_task(
                    http.get("/courses", headers={"X-Forwarded-For": f"203.0.113.{i}"})
                )
                for i in range(5)
            ]
            while gate.entered < 5:  # all five visitors got in at once
                await asyncio.sleep(0.01)
            again = await http.get("/courses", headers={"X-Forwarded-For": "203.0.113.0"})
            gate.release.set()
            return [again.status_code] + [(await task).status_code for task in visitors]

    assert _run(scenario()) == [429, 200, 200, 200, 200, 200]


@pytest.mark.parametrize(("path", "cap"), [("/api/v1/me", 3), ("/api/v1/submissions/x/events", 2)])
def test_the_caps_count_every_token_of_one_learner_together(path: str, cap: int) -> None:
    """A learner with three devices (tabs, tokens) gets the cap once, not once per token."""
    gate = _Gate()
    owners = {"rdv_phone": "ada", "rdv_laptop": "ada", "rdv_tablet": "ada", "rdv_grace": "grace"}
    limits = RequestLimits(
        gate,
        per_caller=3,
        streams_per_caller=2,
        admitted=10,
        wait_s=5,
        learner_of=_owner_by_token(owners),
    )
    greedy = ["rdv_phone", "rdv_laptop", "rdv_tablet"]
    statuses, other_status = _burst(limits, gate, path, greedy, "rdv_grace", cap)
    assert sorted(statuses) == [200] * cap + [429] * (10 - cap)
    assert other_status == 200


@pytest.mark.parametrize(("path", "cap"), [("/api/v1/me", 3), ("/api/v1/submissions/x/events", 2)])
def test_the_app_counts_a_learner_s_tokens_together_from_the_database(
    session: Session, path: str, cap: int
) -> None:
    """The app's own look-up (create_app's, on this backend): three tokens of one learner share
    the learner's caps; a session cookie of the same learner too; another learner's do not."""
    ada, grace = create_user(session), create_user(session)
    tokens = [create_token(session, ada, device_name=f"device {i}") for i in range(3)]
    tokens[0] = service.issue_token(session, ada, device_name="Firefox", kind="browser")
    other = create_token(session, grace)
    real = create_app()

    @contextmanager
    def in_test_session() -> Iterator[Session]:
        yield session

    real.state.unit_of_work = in_test_session
    looked_up = _app_learner_of(real)
    gate = _Gate()
    limits = RequestLimits(
        gate, per_caller=3, streams_per_caller=2, admitted=10, wait_s=5, learner_of=looked_up
    )
    greedy = [*tokens, f"cookie:{tokens[0]}"]  # an app, two more devices, a browser tab
    statuses, other_status = _burst(limits, gate, path, greedy, other, cap)
    assert sorted(statuses) == [200] * cap + [429] * (10 - cap)
    assert other_status == 200
    assert looked_up(token_digest(tokens[0])) == looked_up(token_digest(tokens[2])) == str(ada.id)
    assert looked_up(token_digest("rdv_nobody")) is None


def _app_learner_of(app: FastAPI):  # type: ignore[no-untyped-def]
    """The look-up that create_app gave its RequestLimits."""
    stack = app.build_middleware_stack()
    while not isinstance(stack, RequestLimits):
        stack = stack.app
    return stack.keys.owner_of


def _with_state(inner: RequestLimits):  # type: ignore[no-untyped-def]
    """The error pages read the app's settings; a bare middleware has none, so give it some."""
    from app.config import Settings

    state_app = FastAPI()
    state_app.state.settings = Settings()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = state_app
        await inner(scope, receive, send)

    return app


def test_a_learner_look_up_without_a_connection_answers_503_not_500(
    app: FastAPI, client: TestClient, migrated_urls: dict[str, str], db_backend: str
) -> None:
    """A credential seen for the first time is looked up before the route: with every
    connection busy, that look-up too answers 503 busy with Retry-After."""
    tiny = make_engine(migrated_urls[db_backend], pool_size=1, max_overflow=0, pool_timeout=0.1)
    held = tiny.connect()

    @contextmanager
    def from_tiny_pool() -> Iterator[Session]:
        with Session(tiny) as session:
            yield session

    app.state.unit_of_work = from_tiny_pool
    try:
        response = client.get("/api/v1/me", headers={"Authorization": "Bearer rdv_first_seen"})
    finally:
        held.close()
        tiny.dispose()
    assert response.status_code == 503
    assert response.json()["code"] == "busy"
    assert int(response.headers["retry-after"]) > 0


def test_admission_fits_the_pool_and_threads_outnumber_it() -> None:
    """No pile-up by construction: at most as many requests admitted as the pool has
    connections, more threads than that (a connection's holder always finds a thread for its
    next step), and no dependency overridden in the app that is served."""
    import anyio.to_thread

    from app.config import Settings

    settings = Settings(db_pool_size=30, db_pool_overflow=10)  # more than anyio's 40 threads
    app = create_app(settings)
    assert app.dependency_overrides == {}
    with TestClient(app) as client:
        stack = app.middleware_stack
        while not isinstance(stack, RequestLimits):
            stack = stack.app  # type: ignore[union-attr]
        admitted = stack._admission._value
        threads = client.portal.call(  # type: ignore[union-attr]
            lambda: anyio.to_thread.current_default_thread_limiter().total_tokens
        )
    assert admitted == settings.db_pool_size + settings.db_pool_overflow
    assert threads > admitted
