"""Text a request may store: no NUL (PostgreSQL text cannot hold it) and no lone surrogate (not
UTF-8 at all). Refused with 422 where it enters, never a 500 where it is written."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# The same rule where the OpenAPI document can say it (JSON Schema cannot name a lone surrogate).
NO_NUL = r"^[^\x00]*$"


def storable(value: str) -> str:
    if _UNSTORABLE.search(value):
        raise ValueError("must not contain NUL characters or unpaired surrogates")
    return value


StorableStr = Annotated[str, AfterValidator(storable)]
# For fields with no pattern of their own: the document says "no NUL" too.
NulFreeStr = Annotated[str, Field(pattern=NO_NUL), AfterValidator(storable)]
