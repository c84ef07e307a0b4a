"""Who is calling and where they may be sent back: the client's address, behind trusted proxies
or not (the request limits, `app.limits`, and the sign-in and registration allowances,
`app.auth`), and `safe_next`, a redirect target kept on this site."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.requests import Request


def request_ip(request: Request) -> str:
    """The caller's address; X-Forwarded-For counts only from RDV_TRUSTED_PROXIES."""
    trusted = request.app.state.settings.trusted_proxies.split(",")
    peer = request.client.host if request.client else None
    return client_ip(peer, forwarded_for(request.headers.getlist("x-forwarded-for")), trusted)


def forwarded_for(lines: list[str]) -> str | None:
    """Every X-Forwarded-For header line, in order, as one list: a proxy may add its own line
    instead of extending the client's, and the client's (forged) line must not be the one read."""
    return ", ".join(lines) if lines else None


def client_ip(peer: str | None, forwarded_for: str | None, trusted: Iterable[str]) -> str:
    """The client's address: the peer's, unless the peer is a trusted proxy; then the last
    address in X-Forwarded-For that is not itself a trusted proxy (anyone can write the rest)."""
    proxies = {_canonical(p) for p in trusted if p.strip()}
    address = _canonical(peer or "unknown")
    if address not in proxies or not forwarded_for:
        return address
    for hop in reversed([h.strip() for h in forwarded_for.split(",") if h.strip()]):
        hop = _canonical(hop)
        if hop not in proxies:
            return hop
    return address


def _canonical(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address.strip()))
    except ValueError:
        return address.strip()[:64]


def safe_next(target: str | None) -> str:
    """Only same-site paths: never redirect a learner to another site after signing in."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"
