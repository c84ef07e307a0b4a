"""The password policy: at least 10 characters, and not easy to guess, with the reason said.

"Easy to guess" is what the zxcvbn estimator (PyPI `zxcvbn`, MIT; it ships the 30,000 commonest
passwords, from leaked-password corpora, and English word, name and film lists) rates below 3
of 4, given the site's own words (`SITE_WORDS`) and the account's email address as things an
attacker tries first: `rendezvous1`, `pytorch1234`, `correcthorse`, `abcd1234abcd` and the email
itself are all refused. Also refused outright: one of those 30,000 (digits and `!.` at the end
ignored) and a trivial repeat (`aaaaaaaaaa`, `abcabcabcabc`, spaces). `WeakPassword` says which
rule, in the learner's language.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from zxcvbn import zxcvbn
from zxcvbn.frequency_lists import FREQUENCY_LISTS

from app.errors import N_, AppError

MIN_LENGTH = 10
MIN_DISTINCT = 4
MIN_SCORE = 3  # zxcvbn: 3 is "safely unguessable: moderate protection from offline attacks"
SITE_WORDS = (
    "rendezvous",
    "pytorch",
    "torch",
    "torchrun",
    "distributed",
    "ddp",
    "fsdp",
    "nccl",
    "gloo",
    "allreduce",
    "gradient",
    "learner",
    "coach",
    "lesson",
)

COMMON = N_(
    "This password is too easy to guess: it is one of the most common passwords or a simple "
    "repeat. Choose at least 10 characters, for example three or four unrelated words."
)
FROM_EMAIL = N_(
    "This password is built from your email address, which is the first thing anyone would "
    "try. Choose at least 10 characters, for example three or four unrelated words."
)
FROM_SITE = N_(
    "This password is built from this site's own words (such as Rendezvous or PyTorch), which "
    "are the first thing anyone would try. Choose three or four unrelated words instead."
)
REPEATS = N_(
    "This password is a short pattern repeated or counted up (such as abcd1234abcd). Choose at "
    "least 10 characters, for example three or four unrelated words."
)


class WeakPassword(AppError):
    code = "weak_password"
    status_code = 422
    message = COMMON


@lru_cache
def common_passwords() -> frozenset[str]:
    return frozenset(FREQUENCY_LISTS["passwords"])


def email_words(email: str | None) -> list[str]:
    """The parts of an address someone would try: the whole, its local part, its words."""
    if not email:
        return []
    folded = email.strip().casefold()
    local, _, domain = folded.partition("@")
    words = {folded, local, domain, *re.split(r"[^a-z0-9]+", f"{local} {domain}")}
    return sorted(word for word in words if len(word) >= 3)


def weakness(password: str, *, email: str | None = None) -> str | None:
    """The message saying why the password is refused, or None when it is accepted."""
    folded = password.strip().casefold()
    if len(password) < MIN_LENGTH:
        return COMMON
    if len(set(folded)) < MIN_DISTINCT or _repeats(folded):
        return REPEATS
    if folded in common_passwords() or folded.rstrip("0123456789!.") in common_passwords():
        return COMMON
    mine = email_words(email)
    if _built_from_address(folded, email, mine):
        return FROM_EMAIL
    estimate = zxcvbn(password[:100], user_inputs=[*SITE_WORDS, *mine])
    if estimate["score"] >= MIN_SCORE:
        return None
    return _reason(estimate["sequence"], set(mine))


def _built_from_address(folded: str, email: str | None, mine: list[str]) -> bool:
    """The password holds the address's local part (its letters and digits, 4 or more), or is
    little else than the address's words (`lovelace.ada.99`)."""
    local = re.sub(r"[^a-z0-9]", "", (email or "").casefold().partition("@")[0])
    if len(local) >= 4 and local in re.sub(r"[^a-z0-9]", "", folded):
        return True
    rest = folded
    for word in sorted(mine, key=len, reverse=True):
        rest = rest.replace(word, "")
    return bool(mine) and len(re.sub(r"[^a-z]", "", rest)) < MIN_DISTINCT


def _reason(sequence: list[dict[str, Any]], mine: set[str]) -> str:
    """The rule behind a low estimate: the part of the password that made it guessable."""
    for match in sequence:
        if match.get("dictionary_name") == "user_inputs":
            return FROM_EMAIL if match.get("matched_word") in mine else FROM_SITE
    if any(match.get("pattern") in {"repeat", "sequence"} for match in sequence):
        return REPEATS
    return COMMON


def is_weak(password: str, *, email: str | None = None) -> bool:
    return weakness(password, email=email) is not None


def _repeats(text: str) -> bool:
    """The whole text is one short unit written again and again."""
    for size in range(1, len(text) // 2 + 1):
        unit = text[:size]
        if (unit * (len(text) // size + 1)).startswith(text):
            return True
    return False


def check_password(password: str, *, email: str | None = None) -> None:
    reason = weakness(password, email=email)
    if reason is not None:
        raise WeakPassword(message=reason)
