"""In-process sliding-window rate limits for login and registration.

Each key (client IP, or IP + email) keeps the times of its recent attempts; an attempt is refused
while `limit` attempts fall inside the last `window_s` seconds. State lives in the process, so with
several server processes each enforces its own window (the effective limit is `limit * processes`);
behind a proxy set RDV_TRUSTED_PROXIES so the client IP is the real one (`app.client.client_ip`).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from app.auth.service import normalize_email

MAX_KEYS = 100_000
GUARDED_PACE_S = 10.0


@dataclass
class SlidingWindow:
    limit: int
    window_s: float
    clock: Callable[[], float] = time.monotonic
    _hits: dict[str, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hit(self, key: str) -> float | None:
        """Record an attempt. None if allowed, else the seconds until one would be."""
        now = self.clock()
        with self._lock:
            hits = self._hits.get(key)
            if hits is None:
                if len(self._hits) >= MAX_KEYS:
                    self._prune(now)
                hits = self._hits[key] = deque()
            while hits and hits[0] <= now - self.window_s:
                hits.popleft()
            if len(hits) >= self.limit:
                return max(hits[0] + self.window_s - now, 0.0)
            hits.append(now)
            return None

    def peek(self, key: str) -> float | None:
        """Like `hit` without recording: None if an attempt would be allowed."""
        now = self.clock()
        with self._lock:
            hits = self._hits.get(key)
            recent = [t for t in hits or () if t > now - self.window_s]
            if len(recent) < self.limit:
                return None
            return max(recent[0] + self.window_s - now, 0.0)

    def _prune(self, now: float) -> None:
        stale = [k for k, h in self._hits.items() if not h or h[-1] <= now - self.window_s]
        for key in stale:
            del self._hits[key]
        if len(self._hits) >= MAX_KEYS:  # still full of live keys: forget the oldest half
            for key in list(self._hits)[: MAX_KEYS // 2]:
                del self._hits[key]


@dataclass
class AuthRateLimits:
    """Login: 10 per (IP, email) and 50 per IP per 15 minutes. Per account, 30 wrong passwords
    in 15 minutes from anywhere put it under guard, which never locks its owner out (issue 39,
    D8: 30 guesses used to refuse the right password from a new address for 15 minutes): the
    addresses that guessed wrong at it are refused, and any other address may try once every
    `GUARDED_PACE_S` seconds (a guesser with many addresses gets a few tries a minute; the owner
    signs in, at worst after that pause).
    Registration: 20 per IP per hour. Mail: 10 per recipient an hour, of which 2 "someone tried
    to register with your address". Emails are normalised first (as accounts store them), so
    padding or capitals do not make a new key."""

    login_per_ip_and_account: SlidingWindow = field(default_factory=lambda: SlidingWindow(10, 900))
    login_per_ip: SlidingWindow = field(default_factory=lambda: SlidingWindow(50, 900))
    # Wrong passwords only: per account, and per (address, account) (who guessed).
    failed_per_account: SlidingWindow = field(default_factory=lambda: SlidingWindow(30, 900))
    failed_from: SlidingWindow = field(default_factory=lambda: SlidingWindow(1, 900))
    guarded_pace: SlidingWindow = field(default_factory=lambda: SlidingWindow(1, GUARDED_PACE_S))
    register_per_ip: SlidingWindow = field(default_factory=lambda: SlidingWindow(20, 3600))
    reset_per_account: SlidingWindow = field(default_factory=lambda: SlidingWindow(5, 3600))
    reset_per_ip: SlidingWindow = field(default_factory=lambda: SlidingWindow(20, 3600))
    # Mail: every mail per recipient, and "someone tried to register" (anyone can set it off).
    mail_per_recipient: SlidingWindow = field(default_factory=lambda: SlidingWindow(10, 3600))
    tried_to_register: SlidingWindow = field(default_factory=lambda: SlidingWindow(2, 3600))

    @classmethod
    def for_addresses_shared_by(cls, factor: int) -> AuthRateLimits:
        """The same limits with `factor` times each per-address allowance (sign-in, registration,
        reset requests); per-account and per-recipient ones unchanged. For learners who share one
        address (a classroom behind NAT) and for the browser tests, which sign up dozens of
        learners from 127.0.0.1."""
        limits = cls()
        for name in ("login_per_ip", "register_per_ip", "reset_per_ip"):
            window: SlidingWindow = getattr(limits, name)
            setattr(limits, name, SlidingWindow(window.limit * factor, window.window_s))
        return limits

    def check_login(self, ip: str, email: str) -> int | None:
        """Whether this address may try this account's password now (counted when it may)."""
        account = normalize_email(email)
        return _first_refusal(
            self.login_per_ip.hit(ip),
            self.login_per_ip_and_account.hit(f"{ip}|{account}"),
            self._guarded(ip, account),
        )

    def login_failed(self, ip: str, email: str) -> None:
        """A wrong password for this account from this address."""
        account = normalize_email(email)
        self.failed_per_account.hit(account)
        self.failed_from.hit(f"{ip}|{account}")

    def _guarded(self, ip: str, account: str) -> float | None:
        """Under guard (too many wrong passwords lately): refused from an address that guessed
        wrong, paced from any other; else None."""
        wait = self.failed_per_account.peek(account)
        if wait is None:
            return None
        if self.failed_from.peek(f"{ip}|{account}") is not None:
            return wait
        return self.guarded_pace.hit(account)

    def check_reset(self, ip: str, email: str) -> int | None:
        """Reset mails: 5 per address an hour (a mailbox is not flooded), 20 per IP."""
        return _first_refusal(
            self.reset_per_ip.hit(ip), self.reset_per_account.hit(normalize_email(email))
        )

    def check_mail(self, to: str, *, tried_to_register: bool = False) -> bool:
        """Whether one more mail may go to this address now (counted when it may)."""
        recipient = normalize_email(to)
        if tried_to_register and self.tried_to_register.hit(recipient) is not None:
            return False
        return self.mail_per_recipient.hit(recipient) is None

    def check_register(self, ip: str) -> int | None:
        return _first_refusal(self.register_per_ip.hit(ip))


def _first_refusal(*waits: float | None) -> int | None:
    refused = [w for w in waits if w is not None]
    return max(1, math.ceil(max(refused))) if refused else None
