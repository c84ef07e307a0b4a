"""Accounts over the API: register, token, me, devices, revocation, rate limits (both databases)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import DeviceToken, User
from tests.auth.factories import PASSWORD, bearer, register_and_sign_in


def test_register_then_token_then_me(client: TestClient, session: Session) -> None:
    created = client.post(
        "/api/v1/auth/register",
        json={"email": "Ada@Example.org", "password": PASSWORD, "display_name": "Ada"},
    )
    assert created.status_code == 201
    assert created.json()["email"] == "ada@example.org"
    stored = session.scalars(select(User).where(User.email == "ada@example.org")).one()
    assert stored.password_hash.startswith("$argon2id$")

    issued = client.post(
        "/api/v1/auth/token",
        data={"username": "ADA@example.org", "password": PASSWORD, "device_name": "Pixel 9"},
    )
    assert issued.status_code == 200
    body = issued.json()
    assert body["token_type"] == "bearer"
    me = client.get("/api/v1/me", headers=bearer(body["access_token"]))
    assert me.status_code == 200
    assert me.json()["display_name"] == "Ada"
    # Only the hash is stored.
    device = session.scalars(select(DeviceToken).where(DeviceToken.user_id == stored.id)).one()
    assert device.name == "Pixel 9"
    assert body["access_token"] not in device.token_hash


def test_invalid_bodies_get_invalid_request(client: TestClient) -> None:
    response = client.post(
        "/api/v1/auth/register", json={"email": "nope", "password": "short", "display_name": ""}
    )
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "invalid_request"
    assert {tuple(d["loc"]) for d in body["details"]} >= {("body", "email"), ("body", "password")}


def test_wrong_password_and_unknown_email_look_the_same(client: TestClient) -> None:
    register_and_sign_in(client, "known@example.org")
    wrong = client.post(
        "/api/v1/auth/token", data={"username": "known@example.org", "password": "x" * 12}
    )
    unknown = client.post(
        "/api/v1/auth/token", data={"username": "ghost@example.org", "password": "x" * 12}
    )
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json()
    assert wrong.json()["code"] == "invalid_credentials"


def test_missing_or_bogus_token_is_401(client: TestClient) -> None:
    assert client.get("/api/v1/me").json()["code"] == "not_authenticated"
    bogus = client.get("/api/v1/me", headers=bearer("rdv_not-a-real-token"))
    assert bogus.status_code == 401
    assert bogus.headers["www-authenticate"] == "Bearer"
    basic = client.get("/api/v1/me", headers={"Authorization": "Basic abc"})
    assert basic.status_code == 401


def test_revoking_the_token_in_use_signs_only_that_device_out(client: TestClient) -> None:
    phone = register_and_sign_in(client, "two-devices@example.org")
    tablet_token = client.post(
        "/api/v1/auth/token",
        data={"username": "two-devices@example.org", "password": PASSWORD, "device_name": "Tab"},
    ).json()["access_token"]
    tablet = bearer(tablet_token)

    assert client.delete("/api/v1/auth/token", headers=phone).status_code == 204
    assert client.get("/api/v1/me", headers=phone).status_code == 401
    assert client.delete("/api/v1/auth/token", headers=phone).status_code == 401
    assert client.get("/api/v1/me", headers=tablet).status_code == 200


def test_my_devices_lists_and_revokes(client: TestClient) -> None:
    first = register_and_sign_in(client, "devices@example.org")
    second_token = client.post(
        "/api/v1/auth/token",
        data={"username": "devices@example.org", "password": PASSWORD, "device_name": "Laptop"},
    ).json()["access_token"]
    devices = client.get("/api/v1/auth/devices", headers=first).json()
    assert len(devices) == 2
    assert [d["current"] for d in devices].count(True) == 1
    laptop = next(d for d in devices if d["name"] == "Laptop")
    assert client.delete(f"/api/v1/auth/devices/{laptop['id']}", headers=first).status_code == 204
    assert client.get("/api/v1/me", headers=bearer(second_token)).status_code == 401
    assert len(client.get("/api/v1/auth/devices", headers=first).json()) == 1


def test_another_learners_device_id_is_not_found(client: TestClient) -> None:
    alice = register_and_sign_in(client, "alice@example.org")
    mallory = register_and_sign_in(client, "mallory@example.org")
    alice_device = client.get("/api/v1/auth/devices", headers=alice).json()[0]["id"]
    probe = client.delete(f"/api/v1/auth/devices/{alice_device}", headers=mallory)
    assert probe.status_code == 404
    assert probe.json()["code"] == "not_found"
    assert client.get("/api/v1/me", headers=alice).status_code == 200


def test_login_is_rate_limited_per_ip_and_email(client: TestClient) -> None:
    register_and_sign_in(client, "target@example.org")
    codes = [
        client.post(
            "/api/v1/auth/token", data={"username": "target@example.org", "password": "w" * 12}
        ).status_code
        for _ in range(12)
    ]
    # One successful sign-in above, then wrong passwords until the window of 10 is full.
    assert codes[:9] == [401] * 9
    assert codes[9:] == [429] * 3
    limited = client.post(
        "/api/v1/auth/token", data={"username": "target@example.org", "password": PASSWORD}
    )
    assert limited.status_code == 429
    assert limited.json()["code"] == "rate_limited"
    assert int(limited.headers["retry-after"]) > 0
    # Another account from the same address is still allowed.
    other = client.post(
        "/api/v1/auth/token", data={"username": "someone@example.org", "password": "w" * 12}
    )
    assert other.status_code == 401


def test_registration_is_rate_limited_per_ip(client: TestClient) -> None:
    statuses = [
        client.post(
            "/api/v1/auth/register",
            json={"email": f"bulk{i}@example.org", "password": PASSWORD, "display_name": "B"},
        ).status_code
        for i in range(22)
    ]
    assert statuses[:20] == [201] * 20
    assert statuses[20:] == [429, 429]


def test_a_device_idle_for_90_days_is_signed_out(client: TestClient, session: Session) -> None:
    headers = register_and_sign_in(client, "idle@example.org")
    device = session.scalars(
        select(DeviceToken).join(User).where(User.email == "idle@example.org")
    ).one()
    device.last_used_at = datetime.now(UTC) - timedelta(days=91)
    session.flush()
    assert client.get("/api/v1/me", headers=headers).status_code == 401
    other = client.post(
        "/api/v1/auth/token", data={"username": "idle@example.org", "password": PASSWORD}
    ).json()["access_token"]
    devices = client.get("/api/v1/auth/devices", headers=bearer(other)).json()
    assert [d["id"] for d in devices] != [str(device.id)]
    assert len(devices) == 1  # the idle one is gone from "my devices"
