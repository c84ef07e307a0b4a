"""Content over HTTP: the JSON Schema of the lesson files, and loading the lessons at startup."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, FastAPI

from app.content import service
from app.content.schemas import json_schema

api_router = APIRouter(tags=["content"])


@api_router.get("/content/schema/{kind}", summary="JSON Schema of lesson.yaml or course.yaml")
def content_schema(kind: Literal["lesson", "course"]) -> dict[str, Any]:
    """For editors' autocomplete (yaml-language-server can point at this URL)."""
    return json_schema(kind)


def install(app: FastAPI) -> None:
    """Load the lessons at startup, so content problems are logged before the first visitor."""

    async def _load_lessons(_: FastAPI) -> None:
        service.get_catalog()

    app.state.startup_hooks.append(_load_lessons)
