"""A request's admission slot (`RequestLimits` in app/limits.py hands them out): what it holds
while it may use a database connection, and lets go of while it waits on something outside.

A slot is taken after the request's body has arrived and given back as soon as the response
starts (a slow reader holds nothing), or earlier by the route itself before a wait on the
outside world (the coach's model call, which runs with no transaction open and on threads of its
own: app/coach/execution.py). Work that needs the database again afterwards takes a slot back
with `acquire(timeout_s)`: every wait for a slot has a deadline, and none is ever made while
holding a request thread (issue 39, D1: forty threads waiting for slots while the slots' holders
waited for a thread froze the server for good).
A request that came in without a slot (a test's bare app) gets a slot that does nothing.
"""

from __future__ import annotations

import asyncio

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


def slot_of(request: Request) -> Slot:
    slot = request.scope.get(SCOPE_KEY)
    return slot if isinstance(slot, Slot) else Slot(None, 0.0)
