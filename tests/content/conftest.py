"""Fixture lessons (tests/content/fixtures/lessons) and a way to point the app at them."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURE_LESSONS = Path(__file__).parent / "fixtures" / "lessons"


@pytest.fixture
def lessons_copy(tmp_path: Path) -> Path:
    """A private, editable copy of the fixture lessons."""
    target = tmp_path / "lessons"
    shutil.copytree(FIXTURE_LESSONS, target)
    return target


def point_app_at(monkeypatch: pytest.MonkeyPatch, lessons_dir: Path) -> None:
    from app.config import get_settings
    from app.content import service

    monkeypatch.setenv("RDV_LESSONS_DIR", str(lessons_dir))
    get_settings.cache_clear()
    service.reset()


@pytest.fixture
def use_lessons(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Call `use_lessons(path)` to serve those lessons; settings are restored afterwards."""
    from app.config import get_settings
    from app.content import service

    yield lambda path: point_app_at(monkeypatch, Path(path))
    get_settings.cache_clear()
    service.reset()
