"""Every interface string in the templates and the app is translated into tr and pt-BR."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from app.config import REPO_ROOT
from app.i18n import LOCALES_DIR
from grader.i18n import TRANSLATED_LOCALES

PLACEHOLDER = re.compile(r"%\(\w+\)s|\{\w+\}")


def extracted_messages() -> set[str | tuple[str, ...]]:
    with (REPO_ROOT / "babel.cfg").open() as handle:
        method_map, options_map = parse_mapping_cfg(handle)
    keywords = {**DEFAULT_KEYWORDS, "translate": (2,)}
    found: set[str | tuple[str, ...]] = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
        str(REPO_ROOT), method_map, options_map, keywords=keywords
    ):
        found.add(message if isinstance(message, str) else tuple(message))
    return found


@pytest.mark.parametrize("catalog_dir", [loc.replace("-", "_") for loc in TRANSLATED_LOCALES])
def test_every_interface_string_is_translated(catalog_dir: str) -> None:
    po_file: Path = LOCALES_DIR / catalog_dir / "LC_MESSAGES" / "messages.po"
    with po_file.open("rb") as handle:
        catalog = read_po(handle)
    missing = []
    for message in sorted(extracted_messages(), key=str):
        msgid = message if isinstance(message, str) else message[0]
        entry = catalog.get(msgid)
        strings = entry.string if entry is not None else None
        translations = strings if isinstance(strings, tuple) else (strings,)
        if entry is None or entry.fuzzy or not all(translations):
            missing.append(msgid)
            continue
        for translated in translations:
            assert isinstance(translated, str)
            assert sorted(PLACEHOLDER.findall(msgid)) == sorted(PLACEHOLDER.findall(translated)), (
                f"{po_file}: the placeholders of {msgid!r} differ in {translated!r}"
            )
    assert missing == [], f"add translations to {po_file} for these messages"


def test_the_template_has_every_interface_string() -> None:
    """`app/locales/messages.pot` is what `pybabel init` starts a new language from
    (docs/translating.md): a string the code or the templates use and the template lacks would
    be missing from every new catalog. Regenerate it with the command in babel.cfg."""
    with (LOCALES_DIR / "messages.pot").open("rb") as handle:
        template = read_po(handle)
    missing = sorted(
        msgid
        for message in extracted_messages()
        if (msgid := message if isinstance(message, str) else message[0]) not in template
    )
    assert missing == [], (
        "run `pybabel extract -F babel.cfg -k translate:2 -o app/locales/messages.pot .`"
    )
