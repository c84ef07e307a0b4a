"""One input rule for every request: no control character in any text it carries.

`InputRule` (pure ASGI) refuses, before any route runs, a request whose path, query parameter
names or values, or body text (every key and string of a JSON body, every field of a form) holds
a control character other than tab, line feed and carriage return (NUL among them, which
PostgreSQL text cannot hold), or an unpaired surrogate (not UTF-8 at all): 422 on the API, the
error page elsewhere, in the request's language, with where it was (`details[].loc`). So no
field, present or added later, can reach the database or a template with one (each used to be
checked where it entered, and three places were missed). A body that is not JSON or a form is
left to the route (a code upload is JSON); one that is not valid JSON is left to its parser.

A JSON body nested deeper than `MAX_DEPTH` is refused with 422 too, before anything parses it:
Python's parser (here and in the route) raises RecursionError near a thousand levels, which used to
be a 500 on every JSON route (issue 39, D9); no request of this API nests more than a few.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.error_handlers import error_response
from app.errors import N_
from app.request_body import BODY_METHODS, replay

FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
REFUSED = N_(
    "The request contains a control character (such as NUL) where text was expected. "
    "Remove it and send the request again."
)


MAX_DEPTH = 64
TOO_DEEP = N_("The JSON body is nested more than {limit} levels deep. Send a flatter document.")
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def too_deep(body: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text nests arrays and objects more than `limit` deep (strings skipped;
    read as text, not parsed, so any depth is cheap to measure)."""
    depth = 0
    for bracket in _BRACKET.finditer(_JSON_STRING.sub(b"", body)):
        if bracket.group() in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def offending(scope: Scope, body: bytes) -> list[str] | None:
    """Where the request carries a forbidden character (a location per place), else None."""
    places: list[str] = []
    if FORBIDDEN.search(scope.get("path", "")):  # percent-decoded already
        places.append("path")
    query = scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(query, keep_blank_values=True):  # as the routes will read it
        if FORBIDDEN.search(key) or FORBIDDEN.search(value):
            places.append(f"query.{key[:40]}")
    if body:
        places += [f"body.{where}" for where in _body_places(scope, body)]
    return places or None


def _body_places(scope: Scope, body: bytes) -> Iterator[str]:
    kind = _content_type(scope)
    if kind == "application/x-www-form-urlencoded":
        text = body.decode("latin-1")
        for key, value in parse_qsl(text, keep_blank_values=True):  # as the routes will read it
            if FORBIDDEN.search(key) or FORBIDDEN.search(value):
                yield key[:40]
    elif kind.endswith("json"):
        try:
            document = json.loads(body)
        except ValueError:  # not JSON: the route's own parser answers
            return
        yield from json_places(document, "")


def json_places(value: Any, where: str) -> Iterator[str]:
    if isinstance(value, str):
        if FORBIDDEN.search(value):
            yield where or "(body)"
    elif isinstance(value, dict):
        for key, item in value.items():
            here = f"{where}.{key[:40]}" if where else key[:40]
            if FORBIDDEN.search(key):
                yield here
            yield from json_places(item, here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_places(item, f"{where}.{index}" if where else str(index))


def _content_type(scope: Scope) -> str:
    for key, value in scope.get("headers", []):
        if key == b"content-type":
            return str(value.decode("latin-1").split(";")[0].strip().lower())
    return ""


class InputRule:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = scope.get("method") in BODY_METHODS
        while more:  # the body is in memory already (RequestLimits read it); gather it
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        kind = _content_type(scope)
        if body and (kind.endswith("json") or not kind) and too_deep(body):
            details = [{"loc": ["body"], "msg": "nested too deep", "type": "value_error"}]
            response = error_response(
                Request(scope),
                422,
                "invalid_request",
                TOO_DEEP,
                params={"limit": MAX_DEPTH},
                details=details,
            )
            await response(scope, receive, send)
            return
        places = offending(scope, body)
        if places:
            details = [
                {"loc": place.split("."), "msg": "control character", "type": "value_error"}
                for place in places
            ]
            response = error_response(
                Request(scope), 422, "invalid_request", REFUSED, details=details
            )
            await response(scope, receive, send)
            return
        await self.app(scope, replay(body, receive), send)


# The same rule in the OpenAPI document, where JSON Schema can say it: every string a request
# sends (parameters and request bodies) without a pattern, format or list of values of its own
# gets this pattern; one with a pattern of its own gets it as well, under `allOf`.
NO_CONTROL_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$"
_OWN_RULE = ("format", "enum", "const")


def document_rule(document: dict[str, Any]) -> dict[str, Any]:
    """Write the rule into the request side of an OpenAPI document (in place; returned)."""
    components = document.get("components", {}).get("schemas", {})
    seen: set[str] = set()

    def mark(schema: Any) -> None:
        if isinstance(schema, list):
            for item in schema:
                mark(item)
            return
        if not isinstance(schema, dict):
            return
        reference = schema.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/components/schemas/"):
            name = reference.rsplit("/", 1)[1]
            if name not in seen:
                seen.add(name)
                mark(components.get(name))
        if schema.get("type") == "string" and not any(key in schema for key in _OWN_RULE):
            if "pattern" not in schema:
                schema["pattern"] = NO_CONTROL_PATTERN
            elif schema["pattern"] != NO_CONTROL_PATTERN:
                schema.setdefault("allOf", []).append({"pattern": NO_CONTROL_PATTERN})
        for key in ("properties", "items", "anyOf", "oneOf", "allOf", "additionalProperties"):
            value = schema.get(key)
            mark(list(value.values()) if key == "properties" and isinstance(value, dict) else value)

    for item in document.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                mark(parameter.get("schema"))
            for media in operation.get("requestBody", {}).get("content", {}).values():
                mark(media.get("schema"))
    return document
