"""gzip for the responses the app writes itself: HTML pages and API JSON of 1 KiB or more.

Static assets are compressed on their own, once per file version (`app/assets.py`: they
arrive here with `Content-Encoding` set and pass through); event streams (`text/event-stream`)
and responses under `MIN_BYTES` go out as they are (Starlette's `GZipMiddleware` rules). A lesson
page's HTML (about 116 KB) travels as about 18 KB.

BREACH: a page holds a secret (the CSRF token) next to text a request can choose (the `next`
parameter in links), so a response compressed for a request another site started could leak the
secret through its length. Browsers label such requests (`Sec-Fetch-Site: cross-site` or
`same-site`): they get the response uncompressed. A learner's own navigation (`same-origin`,
`none`) and clients that send no such header (the mobile app, curl) get gzip.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

MIN_BYTES = 1024
COMPRESS_LEVEL = 6  # within 2% of level 9's size on a lesson page, at a fraction of the time
UNCOMPRESSED_SITES = frozenset({"cross-site", "same-site"})


class Compression:
    """The app's gzip (see module doc); registered once in `app.main.create_app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=MIN_BYTES, compresslevel=COMPRESS_LEVEL)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            site = Headers(scope=scope).get("sec-fetch-site", "")
            if site not in UNCOMPRESSED_SITES:
                await self.gzip(scope, receive, send)
                return
        await self.app(scope, receive, send)
