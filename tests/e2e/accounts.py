"""Making an account in the browser as a learner does: the registration form, then (since
registering signs nobody in: it must not tell whether the address was new) the sign-in form it
leads to."""

from __future__ import annotations

from typing import Any


def register(page: Any, *, name: str, email: str, password: str, next: str = "/") -> None:
    """Fill the registration form and submit it; the page is then the sign-in form."""
    page.goto(f"/register?next={next}")
    page.fill("#display_name", name)
    page.fill("#email", email)
    page.fill("#password", password)
    page.locator("form.auth-form button[type=submit]").click()
    page.wait_for_selector('[data-testid="registered"]')


def sign_in_after_registering(page: Any, *, email: str, password: str) -> None:
    """On the sign-in page registering led to: sign in (then the page is where `next` said)."""
    page.fill("#email", email)
    page.fill("#password", password)
    page.locator("form.auth-form button[type=submit]").click()


def register_and_sign_in(
    page: Any, *, name: str, email: str, password: str, next: str = "/"
) -> None:
    register(page, name=name, email=email, password=password, next=next)
    sign_in_after_registering(page, email=email, password=password)
    page.wait_for_load_state()
