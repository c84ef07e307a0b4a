"""Static assets: content-hashed URLs, gzip, and a year of caching for versioned requests.

`static_url("js/lesson.js")` gives `/static/js/lesson.js?v=<first 12 hex of its SHA-256>`. A
request carrying `v` gets `Cache-Control: public, max-age=31536000, immutable` (a changed file
has another hash, hence another URL); one without it must revalidate. Text assets are gzipped
once per file version in memory and sent compressed to browsers that accept gzip.

Static files never use the request thread pool (issue 39, D1): a file is looked up and read on
threads of their own (`_STATIC_THREADS`) within `LOOKUP_DEADLINE_S` (503 past it), and sent from
memory; a server whose request threads are all busy still serves its scripts and styles.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from app.slow_work import OwnThreads

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
COMPRESSIBLE_SUFFIXES = frozenset({".js", ".css", ".svg", ".json", ".map", ".txt", ".html"})
MIN_COMPRESS_BYTES = 1024
LOOKUP_DEADLINE_S = 5.0
_STATIC_THREADS = OwnThreads("rdv_static_threads", 4)


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


@dataclass(frozen=True)
class _Raw:
    mtime_ns: int
    body: bytes


_raw: dict[str, _Raw] = {}


def _raw_file(path: str) -> _Raw:
    mtime_ns = os.stat(path).st_mtime_ns
    cached = _raw.get(path)
    if cached is None or cached.mtime_ns != mtime_ns:
        cached = _Raw(mtime_ns, Path(path).read_bytes())
        _raw[path] = cached
    return cached


class Assets(StaticFiles):
    """StaticFiles with the caching and compression described in the module docstring."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        if scope["method"] not in ("GET", "HEAD"):
            raise HTTPException(status_code=405, headers={"Allow": "GET, HEAD"})
        with anyio.move_on_after(LOOKUP_DEADLINE_S):
            return await anyio.to_thread.run_sync(
                self._respond, path, scope, limiter=_STATIC_THREADS.limiter()
            )
        raise HTTPException(status_code=503, headers={"Retry-After": "2"})

    def _respond(self, path: str, scope: Scope) -> Response:
        """Look the file up, read it (into the memory caches) and answer; in a static thread."""
        try:
            full_path, stat_result = self.lookup_path(path)
        except (OSError, ValueError) as exc:  # too long a name, a NUL: no such file
            raise HTTPException(status_code=404) from exc
        if stat_result is None or not stat.S_ISREG(stat_result.st_mode):
            raise HTTPException(status_code=404)
        return self.file_response(full_path, stat_result, scope)

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
        if response.status_code == 304:
            response.headers["Cache-Control"] = cache_control
            return response
        headers = dict(response.headers)  # its ETag, Last-Modified, Content-Type
        headers.pop("content-length", None)
        headers["Cache-Control"] = cache_control
        headers["Vary"] = "Accept-Encoding"
        return Response(_raw_file(path).body, status_code=status_code, headers=headers)


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
