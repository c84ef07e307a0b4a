"""Text a request may store: no NUL (PostgreSQL text cannot hold it) and no lone surrogate (not
UTF-8 at all). Refused with 422 where it enters, never a 500 where it is written."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(value: str) -> str:
    if _UNSTORABLE.search(value):
        raise ValueError("must not contain NUL characters or unpaired surrogates")
    return value


StorableStr = Annotated[str, AfterValidator(storable)]
