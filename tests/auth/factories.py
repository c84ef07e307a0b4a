"""Small helpers that create accounts and tokens through the service (no hand-written SQL)."""

from __future__ import annotations

import itertools
import re

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.auth import service
from app.auth.models import User

PASSWORD = "correct horse battery"
_numbers = itertools.count(1)


def create_user(session: Session, *, email: str | None = None, name: str = "Ada") -> User:
    email = email or f"learner{next(_numbers)}@example.org"
    user = service.register(session, email=email, password=PASSWORD, display_name=name)
    session.flush()
    return user


def create_token(session: Session, user: User, device_name: str = "Test phone") -> str:
    token = service.issue_token(session, user, device_name=device_name, kind="api")
    session.flush()
    return token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def register_and_sign_in(client: TestClient, email: str | None = None) -> dict[str, str]:
    """Register through the API, get a token, and return the bearer header."""
    email = email or f"api{next(_numbers)}@example.org"
    created = client.post(
        "/api/v1/auth/register",
        json={"email": email, "password": PASSWORD, "display_name": "Grace"},
    )
    assert created.status_code == 201, created.text
    issued = client.post("/api/v1/auth/token", data={"username": email, "password": PASSWORD})
    assert issued.status_code == 200, issued.text
    return bearer(issued.json()["access_token"])


def page_csrf_token(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html) or re.search(
        r'<meta name="csrf-token" content="([^"]+)"', html
    )
    assert match, "the page carries no CSRF token"
    return match.group(1)


def browser_sign_up(client: TestClient, email: str | None = None) -> str:
    """Register through the web form like a browser, then sign in (registering signs nobody
    in); returns the CSRF token of the session."""
    email = email or f"web{next(_numbers)}@example.org"
    token = page_csrf_token(client.get("/register").text)
    response = client.post(
        "/register",
        data={
            "email": email,
            "display_name": "Linus",
            "password": PASSWORD,
            "csrf_token": token,
            "next": "/",
        },
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    assert response.headers["location"].startswith("/login?registered=1")
    signed_in = client.post(
        "/login",
        data={"email": email, "password": PASSWORD, "csrf_token": token, "next": "/"},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert signed_in.status_code == 303, signed_in.text
    assert "rdv_session" in client.cookies
    return token
