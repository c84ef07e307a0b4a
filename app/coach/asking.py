"""Questions being answered right now, per learner, so the hourly limit is atomic.

A question is stored in the learner's history only once answered, after the model call, which
runs outside any transaction (seconds). Counting the history alone let 24 questions asked at
once through a limit of 20. `ASKING.begin(user)` takes a ticket before the limit is checked;
`ticket.earlier` is how many of the learner's questions began before it and are still being
answered: the check counts them as asked. `ticket.done()` after the answer is stored. A ticket
that is never closed (a stream the client never read) lapses after `max_age_s`.

The count lives in the process: with several server processes each counts its own questions.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import dataclass, field


@dataclass
class Ticket:
    registry: Asking
    user_id: uuid.UUID
    number: int
    earlier: int

    def done(self) -> None:
        self.registry._close(self)


@dataclass
class Asking:
    max_age_s: float = 600.0
    _open: dict[uuid.UUID, dict[int, float]] = field(default_factory=dict)
    _numbers: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, user_id: uuid.UUID) -> Ticket:
        now = time.monotonic()
        with self._lock:
            mine = self._open.setdefault(user_id, {})
            for number in [n for n, began in mine.items() if began < now - self.max_age_s]:
                del mine[number]
            number = next(self._numbers)
            ticket = Ticket(self, user_id, number, earlier=len(mine))
            mine[number] = now
            return ticket

    def _close(self, ticket: Ticket) -> None:
        with self._lock:
            mine = self._open.get(ticket.user_id, {})
            mine.pop(ticket.number, None)
            if not mine:
                self._open.pop(ticket.user_id, None)


ASKING = Asking()
