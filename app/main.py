"""create_app(): routers, static files, templates, lifespan."""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from app.config import REPO_ROOT, get_settings

log = logging.getLogger(__name__)

# Each domain exposes `router` (and optionally `api_router`) in its routes module.
# Order matters only for overlapping paths; API routers are mounted under /api/v1.
ROUTE_MODULES: list[str] = [
    # "app.content.routes", "app.auth.routes", ... added by each domain
    "app.content.routes",
    "app.web.routes",
    "app.auth.routes",
    "app.learning.routes",
    "app.submissions.routes",
    "app.health.routes",
]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    for hook in app.state.startup_hooks:
        await hook(app)
    try:
        yield
    finally:
        for hook in reversed(app.state.shutdown_hooks):
            await hook(app)


def create_app() -> FastAPI:
    settings = get_settings()
    app = FastAPI(
        title="Rendezvous API",
        version="1.0.0",
        description="Learn PyTorch distributed training by running real code.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.startup_hooks = []
    app.state.shutdown_hooks = []
    app.mount("/static", StaticFiles(directory=REPO_ROOT / "static"), name="static")
    for module_name in ROUTE_MODULES:
        module = importlib.import_module(module_name)
        api_router: APIRouter | None = getattr(module, "api_router", None)
        if api_router is not None:
            app.include_router(api_router, prefix="/api/v1")
        router: APIRouter | None = getattr(module, "router", None)
        if router is not None:
            app.include_router(router)
        install = getattr(module, "install", None)
        if install is not None:
            install(app)
    return app
