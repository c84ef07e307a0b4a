"""`GET /healthz`: 200 when the database (and, with the procrastinate backend, the queue)
answers, else 503. Used by the compose healthchecks; no session, no locale, nothing cached.
Never counted nor queued by the request limits, on its own connection (service.py) and on its
own threads (`PROBE_THREADS`), never the request pool: a server whose request threads are all
busy still answers its load balancer, and within `PROBE_DEADLINE_S` (503 past it), never hangs."""

from __future__ import annotations

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.health import service
from app.slow_work import OwnThreads

router = APIRouter()

PROBE_DEADLINE_S = 2 * service.PROBE_TIMEOUT_S + 1
_PROBE_THREADS = OwnThreads("rdv_probe_threads", 4)


@router.get("/healthz", include_in_schema=False)
async def healthz(request: Request) -> JSONResponse:
    settings = request.app.state.settings
    database: bool = False
    queue: bool | None = False
    with anyio.move_on_after(PROBE_DEADLINE_S):
        threads = _PROBE_THREADS.limiter()
        database = await anyio.to_thread.run_sync(
            service.database_ok, service.probe_engine(), limiter=threads, abandon_on_cancel=True
        )
        queue = await anyio.to_thread.run_sync(
            service.queue_ok, settings, limiter=threads, abandon_on_cancel=True
        )
    healthy = database and queue is not False
    body = {
        "status": "ok" if healthy else "unavailable",
        "database": "ok" if database else "unreachable",
        "queue": {None: "in-process", True: "ok", False: "unreachable"}[queue],
    }
    headers = {} if healthy else {"Retry-After": "2"}
    return JSONResponse(body, status_code=200 if healthy else 503, headers=headers)
