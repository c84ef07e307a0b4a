import pytest

from app.auth import security
from app.auth.ratelimit import AuthRateLimits, SlidingWindow


def test_passwords_are_argon2id_hashed_and_verified() -> None:
    hashed = security.hash_password("correct horse battery")
    assert hashed.startswith("$argon2id$")
    assert "correct horse" not in hashed
    assert security.verify_password(hashed, "correct horse battery")
    assert not security.verify_password(hashed, "Correct horse battery")
    assert not security.verify_password("not-a-hash", "anything")


def test_device_tokens_are_random_and_stored_only_as_sha256() -> None:
    first, second = security.new_device_token(), security.new_device_token()
    assert first != second
    assert first.startswith("rdv_") and len(first) > 40
    digest = security.token_digest(first)
    assert len(digest) == 64 and first not in digest
    assert digest == security.token_digest(first)


def test_sliding_window_refuses_over_the_limit_and_recovers() -> None:
    now = [1000.0]
    window = SlidingWindow(limit=3, window_s=60, clock=lambda: now[0])
    assert [window.hit("k") for _ in range(3)] == [None, None, None]
    wait = window.hit("k")
    assert wait is not None and 0 < wait <= 60
    assert window.hit("other") is None  # keys are independent
    now[0] += 61
    assert window.hit("k") is None


def test_login_limit_is_per_ip_and_email() -> None:
    limits = AuthRateLimits()
    for _ in range(10):
        assert limits.check_login("1.2.3.4", "a@example.org") is None
    assert limits.check_login("1.2.3.4", "A@example.org") is not None  # case does not matter
    assert limits.check_login("1.2.3.4", "b@example.org") is None
    assert limits.check_login("5.6.7.8", "a@example.org") is None


def test_a_shared_address_factor_raises_only_the_per_address_allowances() -> None:
    limits = AuthRateLimits.for_addresses_shared_by(3)
    for n in range(60):  # 3 x 20 registrations from one address
        assert limits.check_register("10.0.0.1") is None, n
    assert limits.check_register("10.0.0.1") is not None
    for _ in range(10):  # per address and account: unchanged
        assert limits.check_login("10.0.0.1", "a@example.org") is None
    assert limits.check_login("10.0.0.1", "a@example.org") is not None
    assert AuthRateLimits.for_addresses_shared_by(1).register_per_ip.limit == 20


def test_password_hashing_runs_a_few_at_a_time_and_a_flood_gets_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 39, D5: every sign-in hashed at once (argon2: 64 MiB each) took the server to
    1.1 GB. At most HASHING_AT_ONCE run; one that cannot start in time is 503 busy."""
    monkeypatch.setattr(security, "HASHING_WAIT_S", 0.05)
    stored = security.hash_password("violet kettle marmalade")
    for _ in range(security.HASHING_AT_ONCE):  # every turn taken (sign-ins in progress)
        assert security._hashing.acquire(timeout=1)
    try:
        with pytest.raises(security.HashingBusy) as busy:
            security.verify_password(stored, "violet kettle marmalade")
        assert busy.value.status_code == 503
        assert busy.value.headers == {"Retry-After": "2"}
    finally:
        for _ in range(security.HASHING_AT_ONCE):
            security._hashing.release()
    assert security.verify_password(stored, "violet kettle marmalade")
