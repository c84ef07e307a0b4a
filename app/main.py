"""The composition root: `create_app()` lists every part of the running app, in order.

Settings, then the routers (the API under /api/v1, then the pages), the error handlers, the
middleware (the last added runs first), and what starts and stops with the app (`lifespan`).
Nothing arrives by discovery: a new router is one line below.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import anyio.to_thread
from fastapi import Depends, FastAPI

from app.analytics import routes as analytics_routes
from app.analytics.consumer import ThreadConsumer
from app.assets import Assets
from app.auth import account_pages
from app.auth import pages as auth_pages
from app.auth import routes as auth_routes
from app.auth import service as auth_service
from app.auth.csrf import CSRFCookieMiddleware, csrf_context
from app.auth.deps import account_context
from app.auth.ratelimit import AuthRateLimits
from app.coach import pages as coach_pages
from app.coach import routes as coach_routes
from app.coach.index import get_index as coach_index
from app.compression import Compression
from app.config import REPO_ROOT, Settings, get_settings
from app.content import routes as content_routes
from app.content import service as content
from app.db import background_units_of_work, unit_of_work
from app.domain_events import subscribe
from app.error_handlers import CatchAll, install_error_handlers
from app.health import routes as health_routes
from app.input_rule import InputRule, document_rule
from app.learning import routes as learning_routes
from app.limits import BodyLimit, RequestLimits
from app.outmail.sender import Sender
from app.security_headers import SecurityHeaders, csp_context
from app.single_query import single_valued_query
from app.submissions import routes as submission_routes
from app.submissions.backends import GradingBackend, make_backend
from app.templating import add_context_processor
from app.web import api_docs, pwa
from app.web import routes as web_routes

API_PREFIX = "/api/v1"


def lifespan(settings: Settings) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[None]:
        # More threads than requests admitted at once (RequestLimits): a request that holds a
        # database connection always finds a thread for its next step.
        threads = anyio.to_thread.current_default_thread_limiter()
        threads.total_tokens = max(threads.total_tokens, 2 * _admitted(settings) + 8)
        content.get_catalog()  # content problems are logged before the first visitor
        coach_index()  # the coach's retrieval index (rebuilt when the lessons reload)
        backend: GradingBackend | None = None
        if settings.grading_autostarts():
            backend = make_backend()
            await asyncio.to_thread(backend.start)
        app.state.grading_backend = backend
        consumer = _analytics_consumer(settings) if settings.analytics_autostarts() else None
        unsubscribe = None
        if consumer is not None:
            await asyncio.to_thread(consumer.start)
            unsubscribe = subscribe(consumer.notify)  # after each commit that recorded events
        mail: Sender | None = None
        if settings.mail_autostarts():
            mail = Sender(unit_of_work, settings, concurrency=settings.mail_concurrency).start()
        try:
            yield
        finally:
            if consumer is not None and unsubscribe is not None:
                unsubscribe()
                await asyncio.to_thread(consumer.stop)
            if backend is not None:
                await asyncio.to_thread(backend.stop)
                app.state.grading_backend = None
            if mail is not None:  # mails not sent stay queued: the next start sends them
                await asyncio.to_thread(mail.stop)

    return run


class Consumer(Protocol):
    def start(self) -> None: ...
    def notify(self, partitions: frozenset[int]) -> None: ...
    def stop(self) -> None: ...


def _analytics_consumer(settings: Settings) -> Consumer:
    """The analytics consumer of the domain events (app/analytics/consumer.py)."""
    units = background_units_of_work(settings.database_url)  # not the requests' pool
    if settings.analytics_consumer == "queue":
        from app.analytics.queue import QueueConsumer

        return QueueConsumer(units, conninfo=settings.queue_conninfo())
    return ThreadConsumer(units)


def _admitted(settings: Settings) -> int:
    """Requests that may hold a database connection at once: exactly the pool."""
    return settings.db_pool_size + settings.db_pool_overflow


def _learner_of(app: FastAPI) -> Callable[[str], str | None]:
    """The learner a credential belongs to, so that the request caps count per learner."""

    def learner_of(token_digest: str) -> str | None:
        with app.state.unit_of_work() as session:
            owner = auth_service.learner_of_token(session, token_digest)
        return None if owner is None else str(owner)

    return learner_of


def _document_input_rule(app: FastAPI) -> None:
    """/openapi.json states the input rule (app/input_rule.py) on every string a request sends."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_rule(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(
        title="Rendezvous API",
        version="1.0.0",
        description="Learn PyTorch distributed training by running real code.",
        lifespan=lifespan(settings),
        docs_url=None,  # /docs and /redoc from vendored assets (app/web/api_docs.py)
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.grading_backend = None
    app.state.auth_rate_limits = AuthRateLimits.for_addresses_shared_by(
        settings.auth_address_limit_factor
    )
    app.state.unit_of_work = unit_of_work  # outside a route (the limits' look-up of a learner)
    add_context_processor(csrf_context)
    add_context_processor(account_context)
    add_context_processor(csp_context)

    app.mount("/static", Assets(directory=REPO_ROOT / "static"), name="static")
    one_value = [Depends(single_valued_query)]
    app.include_router(content_routes.api_router, prefix=API_PREFIX, dependencies=one_value)
    app.include_router(auth_routes.api_router, prefix=API_PREFIX, dependencies=one_value)
    app.include_router(learning_routes.api_router, prefix=API_PREFIX, dependencies=one_value)
    app.include_router(submission_routes.api_router, prefix=API_PREFIX, dependencies=one_value)
    app.include_router(coach_routes.api_router, prefix=API_PREFIX, dependencies=one_value)
    app.include_router(analytics_routes.api_router, prefix=API_PREFIX, dependencies=one_value)
    app.include_router(web_routes.router)
    app.include_router(pwa.router)
    app.include_router(coach_pages.router)
    app.include_router(analytics_routes.router)
    app.include_router(auth_pages.router)
    app.include_router(account_pages.router)
    app.include_router(learning_routes.router)
    app.include_router(health_routes.router)
    app.include_router(api_docs.router)

    install_error_handlers(app)
    _document_input_rule(app)

    app.add_middleware(CSRFCookieMiddleware, secure=settings.secure_cookies)
    app.add_middleware(InputRule)  # on the body RequestLimits has read whole
    app.add_middleware(
        RequestLimits,
        per_caller=settings.max_requests_per_learner,
        streams_per_caller=settings.max_streams_per_learner,
        questions_per_caller=settings.max_questions_per_learner,
        slots_per_caller=settings.max_slots_per_learner,
        admitted=_admitted(settings),
        wait_s=settings.db_checkout_timeout_s,
        learner_of=_learner_of(app),
        trusted_proxies=settings.trusted_proxies.split(","),
        body_grace_s=settings.body_grace_s,
        body_min_rate=settings.body_min_rate,
    )
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(CatchAll)
    # Outside CatchAll: the headers go on every answer, its 500 included.
    app.add_middleware(SecurityHeaders, https=settings.base_url.startswith("https://"))
    app.add_middleware(Compression)  # outermost: compresses the answer as it finally is
    return app
