"""A stored Result (and its live events) in the viewer's language.

The grader stores English texts with message ids and parameters (grader.i18n); this module
renders them for the locale of the request that reads them (`app.i18n.resolve_locale`, the one
precedence of every path). The locale the code was submitted in plays no part; so do platform
errors, which the app and the queue write as grader message ids too (`jobs.fail_for_platform`,
`grader.queue_protocol.worker_lost`), never pre-translated.
The exercise's own hints (its lesson YAML, in every language) override the grader's defaults.
"""

from __future__ import annotations

from typing import Any

from app.submissions.exercises import spec_from_content
from grader.i18n import localize_check, localize_result, render


def _hints(exercise: str) -> dict[str, Any]:
    spec = spec_from_content(exercise)
    return dict(spec.hints) if spec is not None else {}


def render_result(result: dict[str, Any] | None, exercise: str, locale: str) -> Any:
    """The Result in `locale`; a platform error too (its summary, and its error when the grader
    wrote it with an id)."""
    if result is None:
        return result
    return localize_result(result, locale, _hints(exercise))


def render_summary(result: dict[str, Any] | None, locale: str) -> str | None:
    """Only the summary line ("4 of 12 checks failed"), for lists."""
    if not result or result.get("summary") is None:
        return None
    params = result.get("summary_params") or {}
    return render(result.get("summary_id"), str(result["summary"]), params, locale)


def render_event(kind: str, data: dict[str, Any], exercise: str, locale: str) -> dict[str, Any]:
    """One SSE payload in `locale`: a check's texts, or the final Result's."""
    if kind == "check":
        return localize_check(data, locale, _hints(exercise))
    if kind == "done" and isinstance(data.get("result"), dict):
        return {**data, "result": render_result(data["result"], exercise, locale)}
    return data
