"""Starter code in the learner's language (issue 38): beside `exercises/<id>/starter.py` (English),
`starter.<locale>.py` (`starter.tr.py`, `starter.pt-BR.py`) is the same program with its
comments, docstrings and `# TODO` instructions translated. Its code must be the English starter's,
token for token (comments and docstrings aside), so every language submits the same program.

A translation is used only when it is current:
- missing: English (the page says the starter is shown in English);
- its code differs from the English starter's (the starter changed and the translation was not
  redone): English, and `python -m app.content validate` reports it;
- stale, as lesson texts are (app/content/staleness.py): `translated-from.json` stamps the field
  `exercises.<id>.starter` with the hashes of the English starter and of the translation; the
  English changed since while the translation did not: English.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

from app.content import staleness
from grader.contract import MAX_CODE_BYTES
from grader.i18n import TRANSLATED_LOCALES

_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}
_STATEMENT_START = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def starter_path(folder: Path, locale: str) -> Path:
    return folder / f"starter.{locale}.py"


def field_path(exercise_id: str) -> str:
    """The starter's path among the lesson's translated fields (its stamps, its fallback)."""
    return f"exercises.{exercise_id}.starter"


def code_tokens(source: str) -> list[tuple[int, str]] | None:
    """The program's tokens without comments, blank lines and the text of docstrings (a string
    that is a statement of its own); None when it does not tokenize."""
    out: list[tuple[int, str]] = []
    previous = tokenize.NEWLINE
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in _SKIPPED:
                continue
            text = token.string
            if token.type == tokenize.STRING and previous in _STATEMENT_START:
                text = "<docstring>"
            out.append((token.type, text))
            previous = token.type
    except (tokenize.TokenError, SyntaxError):
        return None
    return out


def same_code(english: str, translated: str) -> bool:
    mine = code_tokens(translated)
    return mine is not None and mine == code_tokens(english)


def read_starter(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) > MAX_CODE_BYTES:
        return None
    return data.decode("utf-8", errors="replace")


def read_translations(folder: Path) -> dict[str, str]:
    """locale -> the translated starter in `folder`, as written (checked by `usable`)."""
    found = {}
    for locale in TRANSLATED_LOCALES:
        code = read_starter(starter_path(folder, locale))
        if code is not None:
            found[locale] = code
    return found


def is_stale(
    stamps: staleness.Stamps, exercise_id: str, locale: str, english: str, text: str
) -> bool:
    stamp = stamps.get(field_path(exercise_id), {}).get(locale)
    if not isinstance(stamp, list) or len(stamp) != 2:
        return False
    english_then, translation_then = stamp
    return bool(
        translation_then == staleness.digest(text) and english_then != staleness.digest(english)
    )


def usable(
    stamps: staleness.Stamps, exercise_id: str, english: str, translations: dict[str, str]
) -> dict[str, str]:
    """The translations a page may show: same code as the English starter, and not stale."""
    return {
        locale: text
        for locale, text in translations.items()
        if same_code(english, text) and not is_stale(stamps, exercise_id, locale, english, text)
    }


def updated_stamps(
    stamps: staleness.Stamps,
    exercise_id: str,
    english: str,
    translations: dict[str, str],
    accept: bool = False,
) -> dict[str, list[str]]:
    """The starter's stamps after `validate --update`: a translation with the English starter's
    code is stamped with the English it now stands beside; a stale one keeps its old stamp."""
    old = stamps.get(field_path(exercise_id), {})
    new: dict[str, list[str]] = {}
    for locale, text in translations.items():
        stale = is_stale(stamps, exercise_id, locale, english, text)
        if stale and not accept and locale in old:
            new[locale] = old[locale]
        elif same_code(english, text):
            new[locale] = [staleness.digest(english), staleness.digest(text)]
    return new
