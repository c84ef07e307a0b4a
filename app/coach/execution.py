"""Where and how long the coach's answer is computed: never on a request thread, never without
a deadline (issue 39, D1).

The model call runs on the coach's own bounded pool (`app.slow_work`), with no admission slot and
no request thread held while it runs. When every thread of that pool is busy, or the model has not
answered by its deadline (RDV_COACH_TIMEOUT_SECONDS plus a grace), the built-in coach answers at
once instead: a question always gets an answer within the deadline. Storing the answer needs the
database again: the request takes an admission slot back, waiting at most `RECORD_WAIT_S`; if
none comes free in that time the answer is still given (and the miss logged), never held back.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import lru_cache
from typing import Any

import anyio.to_thread
from starlette.requests import Request

from app.admission import slot_of
from app.coach import replies, service
from app.coach.llm import ChatProvider
from app.config import Settings
from app.db import SessionFactory
from app.slow_work import Refused, SlowWork

log = logging.getLogger(__name__)

DEADLINE_GRACE_S = 2.0  # past the model's own deadline: the checks on its answer, a busy CPU
RECORD_WAIT_S = 10.0  # for an admission slot to store the answer in


@lru_cache
def model_pool(workers: int) -> SlowWork:
    return SlowWork(workers, "coach-model")


def _pool(settings: Settings) -> SlowWork:
    return model_pool(settings.coach_concurrency)


def _deadline(settings: Settings) -> float:
    return settings.coach_timeout_seconds + DEADLINE_GRACE_S


async def answer(
    settings: Settings, prepared: service.Prepared, provider: ChatProvider | None
) -> replies.Reply:
    """The reply, computed off the request threads; the built-in one when the pool is full or
    the deadline passes."""
    if provider is None:
        return replies.builtin_reply(prepared)
    try:
        return await _pool(settings).run(
            replies.answer, prepared, provider, deadline_s=_deadline(settings)
        )
    except Refused:
        log.warning("every coach model thread is busy: the built-in coach answers")
    except TimeoutError:
        log.warning("the coach model passed its deadline: the built-in coach answers")
    return replies.builtin_reply(prepared)


async def events(
    settings: Settings, prepared: service.Prepared, provider: ChatProvider | None
) -> AsyncIterator[tuple[str, Any]]:
    """replies.stream's events, produced off the request threads; on a full pool or past the
    deadline the built-in coach's answer ends the stream ("reset" first if text was shown)."""
    shown = False

    def items() -> Iterator[tuple[str, Any]]:
        return replies.stream(prepared, provider)

    try:
        async for kind, payload in _pool(settings).stream(items, deadline_s=_deadline(settings)):
            shown = shown or kind == "delta"
            yield kind, payload
        return
    except Refused:
        log.warning("every coach model thread is busy: the built-in coach answers")
    except TimeoutError:
        log.warning("the coach model passed its deadline: the built-in coach answers")
    if shown:
        yield "reset", None
    yield "done", replies.builtin_reply(prepared)


async def record(
    request: Request,
    sessions: SessionFactory,
    user_id: uuid.UUID,
    prepared: service.Prepared,
    reply: replies.Reply,
) -> bool:
    """Store the exchange in a short transaction, holding an admission slot for it (waited for
    at most RECORD_WAIT_S); False (logged) when it could not be stored."""
    slot = slot_of(request)
    had = slot.held
    if not await slot.acquire(timeout_s=RECORD_WAIT_S):
        log.warning("no admission slot in %.0f s: a coach answer was not stored", RECORD_WAIT_S)
        return False

    def store() -> None:
        with sessions() as own:
            service.record(own, user_id=user_id, prepared=prepared, reply=reply)

    try:
        await anyio.to_thread.run_sync(store)
    except Exception:
        log.exception("a coach answer could not be stored")
        return False
    finally:
        if not had:
            slot.release()
    return True
