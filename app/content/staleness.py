"""Translations that say when they are stale.

Beside each `lesson.yaml`, `translated-from.json` (written by `python -m app.content validate
--update`, never by hand) records for every translated field and locale a short hash of the
English it was translated from and of the translation itself:

    {"fields": {"steps.meet-ddp.body": {"tr": ["<english hash>", "<translation hash>"]}}}

A translation is stale when the English changed since it was stamped while the translation
did not: a translator who rewrites it makes it current again (and `--update` stamps the new
pair). A field without a stamp is not known to be stale. Stale fields fall back to English on
the page, with the same notice as a missing translation. Field paths are those of
`app.content.localized` (`steps.<id>.title`, `quiz.<id>.choices.<id>.text`, ...).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from app.content.schemas import Text
from grader.i18n import TRANSLATED_LOCALES

SIDECAR = "translated-from.json"
HASH_CHARS = 10
NOTE = "Written by `python -m app.content validate --update`: which English each translation was made from."  # noqa: E501

Stamps = dict[str, dict[str, list[str]]]  # field path -> locale -> [english hash, translation hash]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_CHARS]


def text_fields(value: Any, path: str = "") -> Iterator[tuple[str, Text]]:
    """Every translatable text in a lesson model, with its dotted path (list items by id)."""
    if isinstance(value, Text):
        yield path, value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from text_fields(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            key = getattr(item, "id", None) or str(index)
            yield from text_fields(item, f"{path}.{key}")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from text_fields(item, f"{path}.{key}")


def read(directory: Path) -> Stamps:
    """The lesson's stamps; none when the file is missing or unreadable (nothing is stale)."""
    try:
        data = json.loads((directory / SIDECAR).read_text(encoding="utf-8"))
        fields = data["fields"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return fields if isinstance(fields, dict) else {}


def stale_fields(lesson: BaseModel, stamps: Stamps) -> dict[str, frozenset[str]]:
    """locale -> the paths whose translation was made from an English that has changed."""
    stale: dict[str, set[str]] = {locale: set() for locale in TRANSLATED_LOCALES}
    for path, text in text_fields(lesson):
        for locale in TRANSLATED_LOCALES:
            translated = text.get(locale)
            stamp = stamps.get(path, {}).get(locale)
            if translated is None or not isinstance(stamp, list) or len(stamp) != 2:
                continue
            english_then, translation_then = stamp
            if translation_then == digest(translated) and english_then != digest(text.en):
                stale[locale].add(path)
    return {locale: frozenset(paths) for locale, paths in stale.items()}


def updated(lesson: BaseModel, stamps: Stamps, accept: frozenset[str] = frozenset()) -> Stamps:
    """New stamps: every translation stamped with the English it now stands beside, except a
    stale one (its old stamp stays until it is translated again, or its path is in `accept`:
    the English edit needed no new translation)."""
    stale = stale_fields(lesson, stamps)
    new: Stamps = {}
    for path, text in text_fields(lesson):
        for locale in TRANSLATED_LOCALES:
            translated = text.get(locale)
            if translated is None:
                continue
            keep = path in stale[locale] and path not in accept
            stamp = stamps[path][locale] if keep else [digest(text.en), digest(translated)]
            new.setdefault(path, {})[locale] = stamp
    return new


def write(directory: Path, stamps: Stamps) -> bool:
    """Write the sidecar; False when it already said exactly this."""
    text = json.dumps({"note": NOTE, "fields": stamps}, indent=1, sort_keys=True) + "\n"
    target = directory / SIDECAR
    try:
        if target.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass
    target.write_text(text, encoding="utf-8")
    return True
