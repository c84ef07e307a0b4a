"""Page tests: the shared `client` fixture, on SQLite only (the pages own no tables; the
database tests of the domains that do run on both backends)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.content.conftest import lessons_copy, use_lessons

__all__ = ["lessons_copy", "use_lessons"]


@pytest.fixture(scope="session")
def migrated_urls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from app.migrate import upgrade

    sqlite_path: Path = tmp_path_factory.mktemp("web-db") / "test.db"
    url = f"sqlite:///{sqlite_path}"
    upgrade(url)
    return {"sqlite": url}


@pytest.fixture
def db_backend() -> str:
    return "sqlite"
