"""Slow work on threads of its own, bounded, with a deadline: never on the request threads.

The coach's model call takes seconds (up to RDV_COACH_TIMEOUT_SECONDS); a request that waited
for it on the request thread pool held one of the threads every other request needs, and when
enough of them did, the server stopped answering anything (the pile-up of issue 39, D1).
`SlowWork.run(fn, ...)` runs `fn` on one of `workers` threads of its own and waits for it
asynchronously (holding no request thread, no admission slot) at most `deadline_s`:

- all `workers` busy: `Refused` at once (the caller answers without the slow work: the
  built-in coach) rather than queueing behind a slow model;
- the deadline passes: `TimeoutError` (the thread finishes on its own: every slow call here
  carries a deadline of its own too, so the pool never fills with forgotten calls for long).

`stream(...)` does the same for a generator: its items arrive one by one, the whole within the
deadline. No FastAPI here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import anyio
from anyio.lowlevel import RunVar

T = TypeVar("T")
_END = object()


class Refused(Exception):
    """Every thread of the pool is busy: answer without the slow work."""


class SlowWork:
    def __init__(self, workers: int, name: str) -> None:
        self.workers = workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._busy = 0
        self._lock = threading.Lock()

    @property
    def busy(self) -> int:
        return self._busy

    def _take(self) -> None:
        with self._lock:
            if self._busy >= self.workers:
                raise Refused()
            self._busy += 1

    def _give(self) -> None:
        with self._lock:
            self._busy -= 1

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        finally:
            self._give()

    async def run(self, fn: Callable[..., T], *args: Any, deadline_s: float) -> T:
        """`fn(*args)` on the pool; Refused when it is full, TimeoutError past the deadline."""
        self._take()
        try:
            future = self._executor.submit(self._call, fn, *args)
        except BaseException:
            self._give()
            raise
        return await asyncio.wait_for(asyncio.wrap_future(future), deadline_s)

    async def stream(
        self, items: Callable[[], Iterator[T]], *, deadline_s: float
    ) -> AsyncIterator[T]:
        """The items of `items()`, produced on the pool; Refused when it is full, TimeoutError
        once the deadline passes (between items or during one)."""
        self._take()
        loop = asyncio.get_running_loop()
        out: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def produce() -> None:
            made = items()
            try:
                for item in made:
                    loop.call_soon_threadsafe(out.put_nowait, item)
                    if stop.is_set():
                        return
                loop.call_soon_threadsafe(out.put_nowait, _END)
            except BaseException as exc:  # handed to the waiting side
                if not stop.is_set():
                    loop.call_soon_threadsafe(out.put_nowait, _Failed(exc))
            finally:
                close = getattr(made, "close", None)
                if close is not None:
                    close()
                self._give()

        try:
            self._executor.submit(produce)
        except BaseException:
            self._give()
            raise
        deadline = loop.time() + deadline_s
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError()
                item = await asyncio.wait_for(out.get(), left)
                if item is _END:
                    return
                if isinstance(item, _Failed):
                    raise item.error
                yield item  # type: ignore[misc]
        finally:
            stop.set()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class OwnThreads:
    """A few threads of a path's own (the health probe, static files), apart from the request
    pool: `limiter()` for anyio.to_thread.run_sync, one per event loop as anyio's default."""

    def __init__(self, name: str, threads: int) -> None:
        self._var: RunVar[anyio.CapacityLimiter] = RunVar(name)
        self.threads = threads

    def limiter(self) -> anyio.CapacityLimiter:
        try:
            return self._var.get()
        except LookupError:
            limiter = anyio.CapacityLimiter(self.threads)
            self._var.set(limiter)
            return limiter
