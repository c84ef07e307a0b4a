"""The in-process mail sender: delivers the outbox (queue.py) with at most `concurrency` mails
at the relay at once, on threads of its own (never the request threads).

It wakes when a commit queued a mail (queue.subscribe) and at least every `poll_s` (mails due
again after a backoff, mails queued by another process). `stop()` (the app's shutdown) lets the
mails in progress finish for a few seconds and puts back any it still holds: the next start, or
another process, sends them. `drain(...)` delivers what is due in the caller's thread (tests,
and a process without a running sender).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from app.config import Settings
from app.db import SessionFactory
from app.mail import MailFailed, deliver
from app.outmail import queue

log = logging.getLogger(__name__)

POLL_S = 2.0


def deliver_one(sessions: SessionFactory, settings: Settings, mail: queue.Claimed) -> bool:
    """Send one claimed mail and record the outcome; whether it was sent."""
    if not settings.smtp_host:
        log.warning("no SMTP server configured (RDV_SMTP_HOST): mail %s was not sent", mail.id)
        with sessions() as session:
            queue.sent(session, mail.id)
        return False
    try:
        deliver(settings, to=mail.to, subject=mail.subject, body=mail.body)
    except MailFailed as exc:
        with sessions() as session:
            queue.failed(session, mail, str(exc))
        return False
    except Exception as exc:  # a bug must not lose the mail either: logged, tried again
        log.exception("sending mail %s raised", mail.id)
        with sessions() as session:
            queue.failed(session, mail, repr(exc))
        return False
    with sessions() as session:
        queue.sent(session, mail.id)
    return True


def drain(sessions: SessionFactory, settings: Settings, limit: int = 100) -> int:
    """Deliver every mail due now, one after another, in this thread; how many were sent."""
    sent = 0
    while True:
        with sessions() as session:
            batch = queue.claim(session, limit=limit)
        if not batch:
            return sent
        for mail in batch:
            sent += deliver_one(sessions, settings, mail)


class Sender:
    def __init__(
        self,
        sessions: SessionFactory,
        settings: Settings,
        *,
        concurrency: int = 4,
        poll_s: float = POLL_S,
    ) -> None:
        self.sessions = sessions
        self.settings = settings
        self.concurrency = concurrency
        self.poll_s = poll_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._free = threading.Semaphore(concurrency)
        self._held: set[uuid.UUID] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="mail")
        self._thread = threading.Thread(target=self._run, name="mail-sender", daemon=True)

    def start(self) -> Sender:
        queue.subscribe(self._wake)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        queue.unsubscribe(self._wake)
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + timeout_s
        for _ in range(self.concurrency):  # the mails in progress, for what is left of it
            if not self._free.acquire(timeout=max(0.0, deadline - time.monotonic())):
                break
        with self._lock:
            unsent = list(self._held)
        if unsent:
            try:
                with self.sessions() as session:
                    queue.release(session, unsent)
            except Exception:
                log.exception("could not put %d mails back (sent after their lease)", len(unsent))

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._round()
            except Exception:
                log.exception("the mail sender's round failed; it tries again")
            self._wake.wait(self.poll_s)
            self._wake.clear()

    def _round(self) -> None:
        """Claim as many due mails as there are free senders, hand each to one; again while
        there were as many as that (more may be due)."""
        while not self._stopping.is_set():
            if not self._free.acquire(timeout=1):
                continue  # every sender busy: look again (or stop)
            free = 1
            while free < self.concurrency and self._free.acquire(blocking=False):
                free += 1
            with self.sessions() as session:
                batch = queue.claim(session, limit=free)
            for _ in range(free - len(batch)):
                self._free.release()
            for mail in batch:
                with self._lock:
                    self._held.add(mail.id)
                self._pool.submit(self._deliver, mail)
            if len(batch) < free:
                return

    def _deliver(self, mail: queue.Claimed) -> None:
        try:
            deliver_one(self.sessions, self.settings, mail)
        except Exception:
            log.exception("recording the outcome of mail %s failed (sent again later)", mail.id)
        finally:
            with self._lock:
                self._held.discard(mail.id)
            self._free.release()
