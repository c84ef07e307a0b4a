"""Password hashing (argon2id) and device tokens (random, stored as SHA-256)."""

from __future__ import annotations

import hashlib
import secrets
from functools import lru_cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from app.config import get_settings

TOKEN_PREFIX = "rdv_"


@lru_cache
def password_hasher() -> PasswordHasher:
    """argon2-cffi's defaults (RFC 9106 low-memory profile) except under test, where cheap
    parameters keep hundreds of registrations fast; `needs_rehash` upgrades such hashes on login."""
    if get_settings().environment == "test":
        return PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
    return PasswordHasher()


def hash_password(password: str) -> str:
    return password_hasher().hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return password_hasher().verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


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
