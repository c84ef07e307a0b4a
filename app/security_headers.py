"""Security headers on every response (pure ASGI: event streams pass through untouched).

The policy allows scripts and styles from this site only: no inline `<script>` or `style=`
anywhere (the templates keep data in `<script type="application/json">` blocks, which never run),
and no framing by other sites. The one exception is the code editor: CodeMirror writes its styles
into a `<style>` element, which carries this response's nonce (`csp_nonce` in every template, read
by static/js/submit.js). HSTS only when the request came over https.
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'nonce-{nonce}'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
# /docs and /redoc (app/web/api_docs.py): scripts still from this site only; inline styles (the
# vendored Swagger UI and ReDoc set style attributes and write <style> elements) and a worker
# from blob: (ReDoc's search). Nothing else.
DOCS_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "worker-src 'self' blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
DOCS_PATHS = frozenset({"/docs", "/redoc"})
HSTS = "max-age=31536000; includeSubDomains"

_NONCE_KEY = "csp_nonce"
_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"strict-origin-when-cross-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


class SecurityHeaders:
    def __init__(self, app: ASGIApp, *, https: bool) -> None:
        self.app = app
        self.https = https  # the site is served over https (behind a proxy that ends TLS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        over_https = self.https or scope.get("scheme") == "https"
        nonce = secrets.token_urlsafe(16)
        scope.setdefault("state", {})[_NONCE_KEY] = nonce
        policy = CONTENT_SECURITY_POLICY.format(nonce=nonce).encode()
        if scope.get("path") in DOCS_PATHS:
            policy = DOCS_POLICY.encode()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                headers = list(message.get("headers", []))
                headers += [(k, v) for k, v in _HEADERS if k not in present]
                headers.append((b"content-security-policy", policy))
                if over_https:
                    headers.append((b"strict-transport-security", HSTS.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def csp_context(request: Request) -> dict[str, Any]:
    """A template context processor: `{{ csp_nonce }}` for `<meta name="csp-nonce">`."""
    return {"csp_nonce": getattr(request.state, _NONCE_KEY, "")}
