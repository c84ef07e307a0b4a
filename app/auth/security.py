"""Password hashing (argon2id) and device tokens (random, stored as SHA-256).

Hashing takes argon2's memory (64 MiB each by default) and a core for a moment: at most
`HASHING_AT_ONCE` run at once in the process, and a request that cannot start one within
`HASHING_WAIT_S` gets 503 `busy` with Retry-After (issue 39, D5: 120 sign-ins at once took the
server from 145 MB to 1.1 GB)."""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from app.config import get_settings
from app.errors import AppError

TOKEN_PREFIX = "rdv_"
HASHING_AT_ONCE = 4
HASHING_WAIT_S = 5.0
_hashing = threading.BoundedSemaphore(HASHING_AT_ONCE)
T = TypeVar("T")


class HashingBusy(AppError):
    code = "busy"
    status_code = 503
    message = "The server is busy right now. Wait a second, then try again."

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": "2"})


@contextmanager
def _hashing_turn() -> Iterator[None]:
    if not _hashing.acquire(timeout=HASHING_WAIT_S):
        raise HashingBusy()
    try:
        yield
    finally:
        _hashing.release()


def _bounded(work: Callable[[], T]) -> T:
    with _hashing_turn():
        return work()


@lru_cache
def password_hasher() -> PasswordHasher:
    """argon2-cffi's defaults (RFC 9106 low-memory profile) except under test, where cheap
    parameters keep hundreds of registrations fast; `needs_rehash` upgrades such hashes on login."""
    if get_settings().environment == "test":
        return PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
    return PasswordHasher()


def hash_password(password: str) -> str:
    return _bounded(lambda: password_hasher().hash(password))


def verify_password(password_hash: str, password: str) -> bool:
    def verify() -> bool:
        try:
            return password_hasher().verify(password_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    return _bounded(verify)


def needs_rehash(password_hash: str) -> bool:
    try:
        return password_hasher().check_needs_rehash(password_hash)
    except InvalidHashError:
        return True


# Verified against when the email is unknown, so a miss costs as long as a wrong password.
@lru_cache
def dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe(16))


def new_device_token() -> str:
    """256 random bits; the prefix makes a leaked token easy to recognise in logs and scanners."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
