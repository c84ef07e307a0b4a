"""Security headers on every answer, the 500 that CatchAll makes included (both databases)."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.db import get_session
from tests.auth.factories import register_and_sign_in


def test_a_500_carries_the_security_headers(app: FastAPI, client: TestClient) -> None:
    auth = register_and_sign_in(client)

    def broken() -> Iterator[Session]:
        raise RuntimeError("the database fell over")
        yield  # pragma: no cover - a generator dependency, like the real one

    app.dependency_overrides[get_session] = broken
    for response in (
        client.get("/api/v1/me", headers=auth),
        client.get("/account/devices", headers={"Accept": "text/html"}),
    ):
        assert response.status_code == 500
        assert "default-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
