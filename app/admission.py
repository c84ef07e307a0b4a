"""A request's admission slot (`RequestLimits` in app/limits.py hands them out): what it holds
while it may use a database connection, and lets go of while it waits on something outside.

A slot is taken after the request's body has arrived and given back as soon as the response
starts (a slow reader holds nothing), or earlier by the route itself around a wait on the
outside world: `outside_slot(request)` around the coach's model call, which runs with no
transaction open. Work that needs the database again after the response started (the coach's
stream records its answer) takes a slot back with `inside_slot(request)`.

Both are plain context managers for the sync routes and generators that run in worker threads
(they reach the event loop through anyio); `Slot.outside()`/`Slot.inside()` are the async forms.
A request that came in without a slot (a test's bare app) gets a slot that does nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio.from_thread
from starlette.requests import Request

SCOPE_KEY = "rdv.slot"


class Slot:
    """One request's share of the admission semaphore: held or not, never twice."""

    def __init__(self, semaphore: asyncio.Semaphore | None, wait_s: float) -> None:
        self._semaphore = semaphore
        self.wait_s = wait_s
        self.held = False

    async def acquire(self, timeout_s: float | None = None) -> bool:
        """Take the slot within `timeout_s` (the admission wait when None); False if not."""
        if self.held or self._semaphore is None:
            self.held = self._semaphore is not None
            return True
        try:
            await asyncio.wait_for(self._semaphore.acquire(), timeout_s or self.wait_s)
        except TimeoutError:
            return False
        self.held = True
        return True

    def release(self) -> None:
        if self.held and self._semaphore is not None:
            self.held = False
            self._semaphore.release()

    async def _take_back(self) -> None:
        """After an outside wait: queue for a slot again, as long as it takes (the work waited
        for is done; the request only needs its turn at the database)."""
        if self._semaphore is not None and not self.held:
            await self._semaphore.acquire()
            self.held = True

    @asynccontextmanager
    async def outside(self) -> AsyncIterator[None]:
        had = self.held
        self.release()
        try:
            yield
        finally:
            if had:
                await self._take_back()

    @asynccontextmanager
    async def inside(self) -> AsyncIterator[None]:
        had = self.held
        await self._take_back()
        try:
            yield
        finally:
            if not had:
                self.release()


def slot_of(request: Request) -> Slot:
    slot = request.scope.get(SCOPE_KEY)
    return slot if isinstance(slot, Slot) else Slot(None, 0.0)


@contextmanager
def outside_slot(request: Request) -> Iterator[None]:
    """In a worker thread: give the request's slot back for the block, take one again after."""
    slot = slot_of(request)
    had = slot.held
    anyio.from_thread.run_sync(slot.release)
    try:
        yield
    finally:
        if had:
            anyio.from_thread.run(slot._take_back)


@contextmanager
def inside_slot(request: Request) -> Iterator[None]:
    """In a worker thread: hold a slot for the block (the database is needed again)."""
    slot = slot_of(request)
    had = slot.held
    anyio.from_thread.run(slot._take_back)
    try:
        yield
    finally:
        if not had:
            anyio.from_thread.run_sync(slot.release)
