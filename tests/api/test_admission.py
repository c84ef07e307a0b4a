"""The admission slot in isolation (app/limits.py, app/admission.py, app/request_body.py): a
body that trickles in is answered 408 without ever holding a slot; a slot goes back when the
response starts and around an outside wait. No timing thresholds: events, not durations."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI
from starlette.types import Message, Receive, Scope, Send

from app.admission import SCOPE_KEY, Slot
from app.config import Settings
from app.limits import RequestLimits


def _scope(method: str = "POST", path: str = "/api/v1/x") -> dict[str, Any]:
    state_app = FastAPI()
    state_app.state.settings = Settings()
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"content-length", b"100"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("t", 80),
        "scheme": "http",
        "http_version": "1.1",
        "app": state_app,
        "state": {},
    }


def _limits(app: Any, admitted: int = 1) -> RequestLimits:
    return RequestLimits(
        app,
        per_caller=10,
        streams_per_caller=2,
        admitted=admitted,
        wait_s=0.2,
        learner_of=lambda _: None,
        body_grace_s=0.2,
        body_min_rate=1_000_000,
    )


def test_a_body_that_stops_half_way_is_answered_408_and_never_holds_a_slot() -> None:
    reached: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope["path"])

    limits = _limits(app)
    sent: list[Message] = []
    stalled = asyncio.Event()

    async def receive() -> Message:
        if not stalled.is_set():
            stalled.set()
            return {"type": "http.request", "body": b'{"a":', "more_body": True}
        await asyncio.Event().wait()  # the rest never comes
        raise AssertionError

    async def send(message: Message) -> None:
        sent.append(message)

    async def scenario() -> None:
        slow = asyncio.create_task(limits(_scope(), receive, send))
        await stalled.wait()
        assert limits._admission._value == 1  # reading the body holds no slot
        await asyncio.wait_for(slow, 10)

    asyncio.run(scenario())
    assert sent[0]["status"] == 408
    assert reached == []
    assert limits._admission._value == 1


def test_the_slot_goes_back_when_the_response_starts() -> None:
    free_after_start: list[int] = []
    limits: RequestLimits

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        assert scope[SCOPE_KEY].held
        await send({"type": "http.response.start", "status": 200, "headers": []})
        free_after_start.append(limits._admission._value)  # a slow reader holds nothing
        await send({"type": "http.response.body", "body": b"ok"})

    limits = _limits(app)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        return None

    asyncio.run(limits(_scope("GET"), receive, send))
    assert free_after_start == [1]


def test_a_slot_given_back_is_taken_again_within_a_deadline_or_not_at_all() -> None:
    async def scenario() -> list[bool]:
        semaphore = asyncio.Semaphore(1)
        mine, other = Slot(semaphore, 0.1), Slot(semaphore, 0.1)
        assert await mine.acquire()
        seen = [await other.acquire()]  # taken: the other waits, then gives up
        mine.release()  # an outside wait: the slot is free meanwhile
        seen.append(await other.acquire())
        seen.append(await mine.acquire(timeout_s=0.05))  # taken back? not while other holds it
        other.release()
        seen.append(await mine.acquire(timeout_s=0.05))
        mine.release()
        return seen

    assert asyncio.run(scenario()) == [False, True, False, True]


def test_one_caller_s_requests_hold_only_their_share_of_the_slots() -> None:
    """Issue 39, D4: a learner's big syncs all wait on that learner's own lock, each holding a
    slot; three such learners held every slot and everyone else got 503. One caller now holds
    at most its share (here 1 of 4); another caller's request is admitted at once."""
    release = asyncio.Event()
    started: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        who = dict(scope["headers"]).get(b"authorization", b"").decode()
        started.append(who)
        if who == "Bearer ada":
            await release.wait()  # waits on the learner's own lock, holding its slot
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    limits = RequestLimits(
        app,
        per_caller=8,
        streams_per_caller=2,
        admitted=4,
        slots_per_caller=1,
        wait_s=5.0,
        learner_of=lambda digest: digest[:8],
    )

    def scope_of(token: str) -> dict[str, Any]:
        scope = _scope("GET")
        scope["headers"] = [(b"authorization", f"Bearer {token}".encode())]
        return scope

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def scenario() -> list[str]:
        statuses: list[str] = []

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                statuses.append(str(message["status"]))

        ada = [asyncio.create_task(limits(scope_of("ada"), receive, send)) for _ in range(4)]
        await asyncio.sleep(0.05)
        await asyncio.wait_for(limits(scope_of("bob"), receive, send), 1.0)  # not queued
        free = limits._admission._value
        release.set()
        await asyncio.gather(*ada)
        return [*statuses, f"free={free}"]

    outcome = asyncio.run(scenario())
    assert outcome[0] == "200"  # bob's, while ada's four wait
    assert outcome[-1] == "free=3"  # ada holds one slot of the four, not all four
    assert started.count("Bearer ada") >= 1
