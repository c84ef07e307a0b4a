"""Locales: which one a request gets, and the interface strings' translations (Babel/gettext).

One negotiation for every path (pages, API, SSE, coach, results and platform errors):
`?locale=`, then the language chooser's cookie `rdv_locale`, then Accept-Language, then
English (`negotiate`, `resolve_locale`). The supported locales are defined once, in
`grader.i18n.LOCALES` (the grader renders its messages in them too); docs/translating.md lists
every place a new one touches. Interface catalogs live in app/locales/<ll_CC>/LC_MESSAGES/
messages.po; `make translations` compiles them to .mo, and a missing or stale .mo is compiled
in memory from the .po.
"""

from __future__ import annotations

import gettext as _gettext
import io
import logging
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import Translations
from fastapi import Depends, Request

from grader.i18n import LOCALES

log = logging.getLogger(__name__)

SUPPORTED_LOCALES: tuple[str, ...] = LOCALES
DEFAULT_LOCALE = "en"
LOCALE_COOKIE = "rdv_locale"
# Each locale's name in itself, for the language chooser; a locale without one shows its code.
LOCALE_NAMES: dict[str, str] = {"en": "English", "tr": "Türkçe", "pt-BR": "Português (Brasil)"}
LOCALES_DIR = Path(__file__).resolve().parent / "locales"
DOMAIN = "messages"

# A bare language picks our regional variant: "pt" and "pt-PT" read pt-BR before English.
_BY_LANGUAGE = {locale.split("-")[0].lower(): locale for locale in SUPPORTED_LOCALES}


def normalize_locale(value: str | None) -> str | None:
    """'pt_br', 'PT-BR', 'pt' -> 'pt-BR'; 'tr-TR' -> 'tr'; unknown -> None."""
    if not value:
        return None
    tag = value.strip().replace("_", "-")
    for locale in SUPPORTED_LOCALES:
        if tag.lower() == locale.lower():
            return locale
    return _BY_LANGUAGE.get(tag.split("-")[0].lower())


def parse_accept_language(header: str) -> list[str]:
    """Language tags by preference (q-value, then order); q=0 and malformed entries dropped."""
    weighted: list[tuple[float, int, str]] = []
    for index, part in enumerate(header.split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                quality = float(params[2:])
            except ValueError:
                continue
        if tag and tag != "*" and quality > 0:
            weighted.append((-quality, index, tag.strip()))
    return [tag for _, _, tag in sorted(weighted)]


def locale_name(locale: str) -> str:
    return LOCALE_NAMES.get(locale, locale)


def negotiate(
    *,
    query: str | None = None,
    cookie: str | None = None,
    accept_language: str | None = None,
) -> str:
    """The one precedence: `?locale=` (this request asks), then the chooser's cookie (the
    learner's standing choice), then Accept-Language (the browser's), then English. Unknown or
    empty values are skipped, never fatal."""
    for candidate in (query, cookie):
        locale = normalize_locale(candidate)
        if locale is not None:
            return locale
    for tag in parse_accept_language(accept_language or ""):
        locale = normalize_locale(tag)
        if locale is not None:
            return locale
    return DEFAULT_LOCALE


def resolve_locale(request: Request) -> str:
    """The locale for this request (see `negotiate`)."""
    return negotiate(
        query=request.query_params.get("locale"),
        cookie=request.cookies.get(LOCALE_COOKIE),
        accept_language=request.headers.get("accept-language"),
    )


LocaleDep = Annotated[str, Depends(resolve_locale)]


def _catalog_dir(locale: str) -> Path:
    return LOCALES_DIR / locale.replace("-", "_") / "LC_MESSAGES"


def _load(locale: str) -> _gettext.NullTranslations:
    folder = _catalog_dir(locale)
    po, mo = folder / f"{DOMAIN}.po", folder / f"{DOMAIN}.mo"
    if mo.is_file() and (not po.is_file() or mo.stat().st_mtime >= po.stat().st_mtime):
        with mo.open("rb") as handle:
            return Translations(handle, domain=DOMAIN)
    if po.is_file():
        # Not compiled yet (or edited since): compile in memory so a fresh checkout translates.
        with po.open("rb") as handle:
            catalog = read_po(handle, locale=locale.replace("-", "_"))
        buffer = io.BytesIO()
        write_mo(buffer, catalog)
        buffer.seek(0)
        return Translations(buffer, domain=DOMAIN)
    if locale != DEFAULT_LOCALE:
        log.warning("no interface translations for %s (looked in %s)", locale, folder)
    return _gettext.NullTranslations()


@lru_cache(maxsize=len(SUPPORTED_LOCALES) * 4)
def _cached(locale: str, stamp: float) -> _gettext.NullTranslations:
    return _load(locale)


def get_translations(locale: str) -> _gettext.NullTranslations:
    """The interface catalog for `locale`, reloaded when its .po or .mo changes."""
    folder = _catalog_dir(locale)
    stamp = max(
        (path.stat().st_mtime for path in folder.glob(f"{DOMAIN}.*o") if path.is_file()),
        default=0.0,
    )
    return _cached(locale, stamp)


def translate(locale: str, message: str) -> str:
    """An interface string in `locale` (for Python code; templates use `_()`)."""
    return get_translations(locale).gettext(message)
