"""The password policy: at least 10 characters, none of the 30,000 commonest passwords (the list
the zxcvbn estimator ships), and not a trivial repeat (`aaaaaaaaaa`, `abcabcabcabc`, spaces)."""

from __future__ import annotations

from functools import lru_cache

from zxcvbn.frequency_lists import FREQUENCY_LISTS

from app.errors import N_, AppError

MIN_LENGTH = 10
MIN_DISTINCT = 4


class WeakPassword(AppError):
    code = "weak_password"
    status_code = 422
    message = N_(
        "This password is too easy to guess: it is one of the most common passwords or a simple "
        "repeat. Choose at least 10 characters, for example three or four unrelated words."
    )


@lru_cache
def common_passwords() -> frozenset[str]:
    return frozenset(FREQUENCY_LISTS["passwords"])


def is_weak(password: str) -> bool:
    folded = password.strip().casefold()
    if len(password) < MIN_LENGTH or len(set(folded)) < MIN_DISTINCT:
        return True
    if folded in common_passwords() or folded.rstrip("0123456789!.") in common_passwords():
        return True
    return _repeats(folded)


def _repeats(text: str) -> bool:
    """The whole text is one short unit written again and again."""
    for size in range(1, len(text) // 2 + 1):
        unit = text[:size]
        if (unit * (len(text) // size + 1)).startswith(text):
            return True
    return False


def check_password(password: str) -> None:
    if is_weak(password):
        raise WeakPassword()
