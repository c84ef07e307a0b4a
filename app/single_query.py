"""Every query parameter of the API takes one value. A repeated one (`?lesson_id=a&lesson_id=b`)
is refused with 422 like any other invalid parameter, instead of being read silently as its
last value (the API has no list-valued query parameters)."""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError


def single_valued_query(request: Request) -> None:
    """A router dependency for the API: 422 when a query parameter is given more than once."""
    seen: set[str] = set()
    repeated: list[str] = []
    for key, _ in request.query_params.multi_items():
        if key in seen and key not in repeated:
            repeated.append(key)
        seen.add(key)
    if repeated:
        raise RequestValidationError(
            [
                {"type": "repeated", "loc": ("query", key), "msg": "given more than once"}
                for key in repeated
            ]
        )
