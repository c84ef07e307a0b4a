"""One input rule (app/input_rule.py), everywhere: a NUL or another control character in any
query parameter, path parameter, JSON field or form field of any operation in the OpenAPI
document, and of any page route, is refused with 422, never a 500 and never stored (both
databases). The operations and pages are read from the app itself, so a route added later is
walked too."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from tests.auth.factories import browser_sign_up, register_and_sign_in

BAD = ["\x00", "\x1b", "\x7f"]
SAMPLE_PATH_VALUES = {"lesson_id": "ddp-fundamentals", "step_id": "meet-ddp"}


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]


def _fill(path: str, operation: dict[str, Any], bad_param: str | None, bad: str) -> str:
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "path":
            name = parameter["name"]
            value = bad + "x" if name == bad_param else SAMPLE_PATH_VALUES.get(name, "x")
            path = path.replace("{" + name + "}", quote(value, safe=""))
    return path


def _cases(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], str, str]]:
    """(method, path, operation, where, name) for every parameter and body field."""
    cases = []
    for method, path, operation in _operations(document):
        for parameter in operation.get("parameters", []):
            if parameter["in"] in {"query", "path"}:
                cases.append((method, path, operation, parameter["in"], parameter["name"]))
        content = operation.get("requestBody", {}).get("content", {})
        for kind, media in content.items():
            schema = _resolve(document, media.get("schema", {}))
            for name in schema.get("properties", {}):
                cases.append((method, path, operation, kind, name))
    return cases


def _body(document: dict[str, Any], operation: dict[str, Any], kind: str) -> dict[str, Any]:
    """A body that would otherwise be plausible: every string field a short word."""
    schema = _resolve(document, operation["requestBody"]["content"][kind]["schema"])
    return {name: "word" for name in schema.get("properties", {})}


@pytest.mark.parametrize("bad", BAD, ids=["nul", "escape", "delete"])
def test_every_operation_of_the_document_refuses_control_characters(
    client: TestClient, app: FastAPI, bad: str
) -> None:
    auth = register_and_sign_in(client)
    document = client.get("/openapi.json").json()
    cases = _cases(document)
    assert len(cases) > 40  # the walk found the API
    refused = {}
    for method, path, operation, where, name in cases:
        url = _fill(path, operation, name if where == "path" else None, bad)
        kwargs: dict[str, Any] = {"headers": auth}
        if where == "query":
            kwargs["params"] = {name: bad + "x"}
        elif where == "application/json":
            kwargs["json"] = {**_body(document, operation, where), name: bad + "x"}
        elif where == "application/x-www-form-urlencoded":
            kwargs["data"] = {**_body(document, operation, where), name: bad + "x"}
        elif where != "path":
            continue
        response = client.request(method, url, **kwargs)
        refused[f"{method} {path} {where}.{name}"] = response.status_code
    assert {case: status for case, status in refused.items() if status != 422} == {}


def _page_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path) of every route outside the API: the pages, their forms, /healthz."""
    found = []
    for included in app.routes:
        context = getattr(included, "include_context", None)  # an included router
        if context is None or context.prefix.startswith("/api/"):
            continue
        for route in context.included_router.routes:
            if isinstance(route, APIRoute):
                found += [(method, context.prefix + route.path) for method in sorted(route.methods)]
    return found


@pytest.mark.parametrize("bad", BAD, ids=["nul", "escape", "delete"])
def test_every_page_route_refuses_control_characters_signed_in(
    client: TestClient, app: FastAPI, bad: str
) -> None:
    browser_sign_up(client)
    routes = _page_routes(app)
    assert len(routes) > 20  # the walk found the pages
    html = {"Accept": "text/html", "Origin": "http://testserver"}
    answers = {}
    for method, path in routes:
        url = path
        for name in [part[1:-1] for part in path.split("/") if part.startswith("{")]:
            url = url.replace("{" + name + "}", quote(SAMPLE_PATH_VALUES.get(name, "x"), safe=""))
        query = client.request(method, url, params={"next": bad + "/"}, headers=html)
        answers[f"{method} {path} ?next"] = query.status_code
        if "{" in path:  # a path parameter with the character
            broken = path.split("{", 1)[0] + quote(bad + "x", safe="") + "/"
            answers[f"{method} {broken}"] = client.request(method, broken, headers=html).status_code
        if method == "POST":
            form = client.post(url, data={"email": bad, "password": bad, "q": bad}, headers=html)
            answers[f"POST {path} form"] = form.status_code
            assert "text/html" in form.headers["content-type"]
    refused = {case: status for case, status in answers.items() if status != 422}
    # A path parameter in the last place may be refused by the router first (no such page).
    assert {case: status for case, status in refused.items() if status != 404} == {}
    assert all("?next" not in case and "form" not in case for case in refused)


def test_the_three_places_the_earlier_fix_missed(client: TestClient) -> None:
    auth = register_and_sign_in(client)
    question = {"question": "why\x00", "lesson_id": "ddp-fundamentals"}
    assert client.post("/api/v1/coach", json=question, headers=auth).status_code == 422
    history = client.get("/api/v1/coach/history?lesson_id=%00", headers=auth)
    assert history.status_code == 422
    assert history.json()["details"][0]["loc"] == ["query", "lesson_id"]
    browser_sign_up(client)
    page = client.get("/lessons/ddp-fundamentals%00", headers={"Accept": "text/html"})
    assert page.status_code == 422
    assert "text/html" in page.headers["content-type"]


def test_tabs_and_new_lines_in_code_are_still_text(client: TestClient) -> None:
    auth = register_and_sign_in(client)
    draft = {"code": "def main():\n\tprint('ok')\r\n"}
    saved = client.put("/api/v1/drafts/ddp-fundamentals/train", json=draft, headers=auth)
    assert saved.status_code in {200, 204}, saved.text
