"""`GET /healthz`: 200 when the database (and, with the procrastinate backend, the queue)
answers, else 503. Used by the compose healthchecks; no session, no locale, nothing cached.
Never counted nor queued by the request limits, and on its own connection (service.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from app.health import service

router = APIRouter()


@router.get("/healthz", include_in_schema=False)
async def healthz(request: Request) -> JSONResponse:
    database = await run_in_threadpool(service.database_ok, service.probe_engine())
    queue = await run_in_threadpool(service.queue_ok, request.app.state.settings)
    healthy = database and queue is not False
    body = {
        "status": "ok" if healthy else "unavailable",
        "database": "ok" if database else "unreachable",
        "queue": {None: "in-process", True: "ok", False: "unreachable"}[queue],
    }
    return JSONResponse(body, status_code=200 if healthy else 503)
