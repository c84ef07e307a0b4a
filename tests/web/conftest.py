"""Page tests: the shared `client` fixture, on SQLite unless a module asks for both backends.

Most pages own no tables, so one backend is enough; a module whose pages show or record a
learner's progress overrides `db_backend` to run on PostgreSQL too (see test_progress_pages.py).
The databases come from the root conftest's `migrated_urls`: an SQLite-only override here
poisoned the session-scoped `engines` for every later test in the same process (tests/auth then
failed with KeyError: 'postgres' when run together with tests/web).
"""

from __future__ import annotations

import pytest

from tests.content.conftest import lessons_copy, use_lessons

__all__ = ["lessons_copy", "use_lessons"]


@pytest.fixture
def db_backend() -> str:
    return "sqlite"
