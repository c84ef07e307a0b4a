"""A check's outcome as a viewer in another language reads it, and the English left in it."""

from __future__ import annotations

import re

from grader.checks.base import Outcome
from grader.i18n import localize_check, message_fields

# Words of English prose that neither Turkish nor Portuguese text contains (code spans aside).
_PROSE = """the and was were of with never before after it its but only every each not has had
called saved wrapped still went ran took"""
ENGLISH_WORDS = frozenset(_PROSE.split())


def rendered(check_id: str, outcome: Outcome, locale: str) -> str:
    """The outcome's message in `locale`, as the API renders it from the stored id and params."""
    message_id, params = message_fields(outcome.message)
    assert message_id is not None, f"{check_id}: a plain string, not translated"
    check = {
        "id": check_id,
        "status": outcome.status,
        "title": "",
        "message": str(outcome.message),
        "message_id": message_id,
        "params": params,
    }
    return str(localize_check(check, locale)["message"])


def english_left(text: str) -> set[str]:
    """The English prose words in `text`, outside `code` spans."""
    prose = re.sub(r"`[^`]*`", " ", text)
    return set(re.findall(r"[a-z]+", prose.lower())) & ENGLISH_WORDS
