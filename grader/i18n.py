"""Grader texts in the viewer's language: message ids with parameters beside the English text.

A check says its outcome in one call, `msg("sampler.overlap", "Ranks {a} and {b} ...", a=0, b=1)`:
the value is the English text (a `str`, so the Result's `message` field is as before) that also
carries `message_id` and `params`. The grader stores both in the Result; whoever shows the Result
renders it in the viewer's locale with `localize_result` (the API does, per request), never in
the locale the code was submitted in.

Catalogs: `grader/locales/<locale>/*.json` (one file per area: `core.json`, one per check
module), each an object of message id -> template, merged per locale (an id in two files is an
error), for every id the grader uses: `title.<check id>` and `hint.<check id>` (from each check's
registration), the summary and combination texts below, and every `msg(...)` id in the checks.
A missing entry falls back to English; a test fails when one is missing. Terms follow
docs/glossary.md (shared with the lessons and the interface): rank stays "rank" in tr and pt-BR,
a process group is "süreç grubu" / "grupo de processos", and so on.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

# Every supported locale, defined once: the app's pages, API and lessons use this list too
# (app.i18n.SUPPORTED_LOCALES); docs/translating.md lists what a new one needs.
LOCALES: tuple[str, ...] = ("en", "tr", "pt-BR")
TRANSLATED_LOCALES: tuple[str, ...] = tuple(locale for locale in LOCALES if locale != "en")
CATALOG_DIR = Path(__file__).parent / "locales"

# The grader's own texts outside the checks, by id (English templates).
SUMMARY_FAILED = "{failed} of {total} checks failed"
SUMMARY_PASSED = "All {passed} checks passed"
SUMMARY_PASSED_SKIPPED = "All {passed} checks passed ({skipped} not applicable here)"
WITH_RANKS = "With {ranks} ranks: {message}"
WITH_ONE_RANK = "With 1 rank: {message}"
AS_NODES = "As a {nodes}-node job ({ranks} ranks): {message}"
PLATFORM_FAILED = "The grader failed; this does not count."


class Message(str):
    """English text that remembers its message id and parameters."""

    message_id: str
    template: str
    params: dict[str, Any]

    def __new__(cls, message_id: str, template: str, params: Mapping[str, Any]) -> Message:
        text = super().__new__(cls, _format(template, params))
        text.message_id = message_id
        text.template = template
        text.params = dict(params)
        return text

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle keep the id and parameters
        return (Message, (self.message_id, self.template, self.params))


def msg(message_id: str, template: str, **params: Any) -> Message:
    """The English text of `template` with `params`, carrying its id for translation.

    Parameters are plain JSON values; a parameter that is itself a `Message` (a nested sentence)
    is stored as {"id", "en", "params"} and translated too.
    """
    return Message(message_id, template, params)


def message_fields(text: str) -> tuple[str | None, dict[str, Any]]:
    """(message_id, params as JSON) of a text, or (None, {}) for a plain string."""
    if not isinstance(text, Message):
        return None, {}
    return text.message_id, {key: _param_json(value) for key, value in text.params.items()}


def _param_json(value: Any) -> Any:
    if isinstance(value, Message):
        message_id, params = message_fields(value)
        return {"id": message_id, "en": str(value), "params": params}
    return value


@cache
def catalog(locale: str) -> dict[str, str]:
    """The translations for `locale` (empty for English and unknown locales)."""
    folder = CATALOG_DIR / locale
    if locale == "en" or not folder.is_dir():
        return {}
    merged: dict[str, str] = {}
    for path in sorted(folder.glob("*.json")):
        data: dict[str, str] = json.loads(path.read_text("utf-8"))
        twice = sorted(set(merged) & set(data))
        if twice:
            raise ValueError(f"{path}: ids already translated in another file: {twice}")
        merged.update(data)
    return merged


def render(message_id: str | None, english: str, params: Mapping[str, Any], locale: str) -> str:
    """The text in `locale`: its catalog template with the parameters, else the English."""
    template = catalog(locale).get(message_id) if message_id else None
    if template is None:
        return english
    values = {key: _render_param(value, locale) for key, value in params.items()}
    try:
        return _format(template, values)
    except (KeyError, IndexError, ValueError):  # a broken translation never hides the verdict
        return english


def _render_param(value: Any, locale: str) -> Any:
    if isinstance(value, dict) and "id" in value and "en" in value:
        return render(value["id"], value["en"], value.get("params") or {}, locale)
    return value


class _Formatter(string.Formatter):
    """str.format plus `{n:ordinal}`: 1st, 2nd, 3rd, 11th (English templates; a translation
    writes its own form, e.g. "{n}." in Turkish, "{n}ª" in Portuguese), and `{x:capital}`: the
    parameter with its first letter in capitals, where it begins a sentence ("rank 1" as a
    parameter -> "Rank 1 also wrote ...")."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "capital":
            text = str(value)
            return text[:1].upper() + text[1:]
        if format_spec == "ordinal":
            n = int(value)
            suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
            return f"{n}{suffix}"
        return str(super().format_field(value, format_spec))


def _format(template: str, params: Mapping[str, Any]) -> str:
    return _Formatter().vformat(template, (), dict(params))


def localize_result(
    result: Mapping[str, Any],
    locale: str,
    hints: Mapping[str, Mapping[str, str] | str] | None = None,
) -> dict[str, Any]:
    """A Result (as JSON) with its summary, check titles, messages and hints in `locale`.

    `hints`: the exercise's own hints per check id ({locale: text} or English text), which
    override the grader's default hint, as they do when grading.
    """
    out = dict(result)
    if locale == "en" and not hints:
        return out
    out["summary"] = render(
        result.get("summary_id"),
        result.get("summary", ""),
        result.get("summary_params") or {},
        locale,
    )
    out["checks"] = [localize_check(check, locale, hints) for check in result.get("checks") or []]
    if result.get("error_id"):
        out["error"] = render(
            result["error_id"], result.get("error") or "", result.get("error_params") or {}, locale
        )
    return out


def localize_check(
    check: Mapping[str, Any],
    locale: str,
    hints: Mapping[str, Mapping[str, str] | str] | None = None,
) -> dict[str, Any]:
    """One check (as JSON, from a Result or a live event) in `locale`."""
    out = dict(check)
    check_id = str(check.get("id", ""))
    out["title"] = render(f"title.{check_id}", check.get("title", ""), {}, locale)
    out["message"] = render(
        check.get("message_id"), check.get("message", ""), check.get("params") or {}, locale
    )
    if check.get("hint"):
        hint_of = str(check.get("hint_of") or check_id)  # the check whose hint it is
        own = (hints or {}).get(hint_of)
        if isinstance(own, Mapping):
            out["hint"] = own.get(locale) or own.get("en") or check["hint"]
        elif own is None:
            out["hint"] = render(f"hint.{hint_of}", check["hint"], {}, locale)
    return out
