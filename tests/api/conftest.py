"""The content fixtures (a private copy of the fixture lessons, and pointing the app at it)."""

from tests.content.conftest import lessons_copy, use_lessons

__all__ = ["lessons_copy", "use_lessons"]
