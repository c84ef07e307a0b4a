"""Static assets: content-hashed URLs, gzip, and a year of caching for versioned requests.

`static_url("js/lesson.js")` gives `/static/js/lesson.js?v=<first 12 hex of its SHA-256>`. A
request carrying `v` gets `Cache-Control: public, max-age=31536000, immutable` (a changed file
has another hash, hence another URL); one without it must revalidate. Text assets are gzipped
once per file version in memory and sent compressed to browsers that accept gzip.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
COMPRESSIBLE_SUFFIXES = frozenset({".js", ".css", ".svg", ".json", ".map", ".txt", ".html"})
MIN_COMPRESS_BYTES = 1024


@dataclass(frozen=True)
class _Compressed:
    mtime_ns: int
    body: bytes
    etag: str


_hashes: dict[tuple[str, int], str] = {}
_gzipped: dict[str, _Compressed] = {}


def content_version(file: Path) -> str:
    """The first 12 hex digits of the file's SHA-256 ("0" when it is missing)."""
    try:
        stat = file.stat()
    except OSError:
        return "0"
    key = (str(file), stat.st_mtime_ns)
    if key not in _hashes:
        _hashes[key] = hashlib.sha256(file.read_bytes()).hexdigest()[:12]
    return _hashes[key]


def _gzipped_file(path: str) -> _Compressed:
    mtime_ns = os.stat(path).st_mtime_ns
    cached = _gzipped.get(path)
    if cached is None or cached.mtime_ns != mtime_ns:
        raw = Path(path).read_bytes()
        digest = hashlib.sha256(raw).hexdigest()[:16]
        cached = _Compressed(
            mtime_ns, gzip.compress(raw, compresslevel=9, mtime=0), f'"{digest}-gz"'
        )
        _gzipped[path] = cached
    return cached


class Assets(StaticFiles):
    """StaticFiles with the caching and compression described in the module docstring."""

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        request_headers = Headers(scope=scope)
        versioned = b"v=" in scope.get("query_string", b"")
        cache_control = IMMUTABLE if versioned else REVALIDATE
        path = str(full_path)
        accepts_gzip = "gzip" in request_headers.get("accept-encoding", "")
        if (
            accepts_gzip
            and Path(path).suffix in COMPRESSIBLE_SUFFIXES
            and stat_result.st_size >= MIN_COMPRESS_BYTES
        ):
            compressed = _gzipped_file(path)
            if request_headers.get("if-none-match") == compressed.etag:
                return Response(
                    status_code=304,
                    headers={"ETag": compressed.etag, "Cache-Control": cache_control},
                )
            return Response(
                compressed.body,
                status_code=status_code,
                media_type=_media_type(path),
                headers={
                    "Content-Encoding": "gzip",
                    "Cache-Control": cache_control,
                    "ETag": compressed.etag,
                    "Vary": "Accept-Encoding",
                },
            )
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = cache_control
        response.headers["Vary"] = "Accept-Encoding"
        return response


def _media_type(path: str) -> str:
    suffix = Path(path).suffix
    return {
        ".js": "text/javascript; charset=utf-8",
        ".css": "text/css; charset=utf-8",
        ".svg": "image/svg+xml",
        ".json": "application/json",
        ".map": "application/json",
        ".txt": "text/plain; charset=utf-8",
        ".html": "text/html; charset=utf-8",
    }[suffix]
