"""Content over HTTP: the JSON Schema of the lesson files."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from app.content.schemas import json_schema

api_router = APIRouter(tags=["content"])


@api_router.get("/content/schema/{kind}", summary="JSON Schema of lesson.yaml or course.yaml")
def content_schema(kind: Literal["lesson", "course"]) -> dict[str, Any]:
    """For editors' autocomplete (yaml-language-server can point at this URL)."""
    return json_schema(kind)
