"""Jinja2 templates with gettext per request: `render(request, name, **context)`.

Every page gets `locale`, `locales` (for the chooser), `_`/`gettext`/`ngettext` in the request's
locale, `static_url(path)` and whatever the registered context processors add (the auth domain
adds `csrf_token`). Responses carry `Content-Language`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2.ext import _make_new_gettext, _make_new_ngettext
from markupsafe import Markup
from starlette.templating import Jinja2Templates

from app.assets import content_version
from app.config import REPO_ROOT
from app.content.markdown import highlight_code
from app.errors import N_
from app.i18n import SUPPORTED_LOCALES, get_translations, locale_name, resolve_locale, translate

TEMPLATES_DIR = REPO_ROOT / "templates"
STATIC_DIR = REPO_ROOT / "static"

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
    autoescape=jinja2.select_autoescape(("html", "xml")),
    extensions=["jinja2.ext.i18n"],
    trim_blocks=True,
    lstrip_blocks=True,
)
# New-style gettext: `_("Step %(n)s", n=3)` formats and escapes; `{% trans %}` works too.
_env.newstyle_gettext = True  # type: ignore[attr-defined]

templates = Jinja2Templates(env=_env)


def static_url(path: str) -> str:
    """/static/<path>?v=<content hash>: cached for a year, and a changed file gets a new URL."""
    return f"/static/{path}?v={content_version(STATIC_DIR / path)}"


def template_exists(name: str) -> bool:
    try:
        _env.get_template(name)
    except jinja2.TemplateNotFound:
        return False
    return True


def highlight_python(code: str) -> Markup:
    """Python code as highlighted HTML spans, for a read-only <pre>."""
    return Markup(highlight_code(code, "python"))


_env.globals.update(static_url=static_url, template_exists=template_exists)
_env.filters["highlight_python"] = highlight_python


def add_context_processor(processor: Callable[[Request], dict[str, Any]]) -> None:
    """Let another domain add variables to every page (e.g. auth's `csrf_token`)."""
    if processor not in templates.context_processors:
        templates.context_processors.append(processor)


def _gettext_context(locale: str) -> dict[str, Any]:
    translations = get_translations(locale)
    gettext = _make_new_gettext(translations.gettext)
    return {
        "_": gettext,
        "gettext": gettext,
        "ngettext": _make_new_ngettext(translations.ngettext),
    }


def render(
    request: Request,
    name: str,
    *,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
    locale: str | None = None,
    **context: Any,
) -> HTMLResponse:
    """The template rendered in the request's locale, with Content-Language set."""
    locale = locale or resolve_locale(request)
    page_context = {
        "locale": locale,
        "locales": [(code, locale_name(code)) for code in SUPPORTED_LOCALES],
        "current_url": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        **_gettext_context(locale),
        **context,
    }
    response_headers = {
        "Content-Language": locale,
        "Vary": "Cookie, Accept-Language",
        **(headers or {}),
    }
    return templates.TemplateResponse(
        request, name, page_context, status_code=status_code, headers=response_headers
    )


NOT_FOUND = N_("Nothing exists at this address. Check the path against /openapi.json.")


def refuse_unless_instructor(
    request: Request, user: Any, locale: str, page: str
) -> Response | None:
    """None for an instructor; otherwise the answer of an instructors' page: a visitor is sent
    to sign in (and back to `page`), a signed-in learner gets the site's 404 page (the page does
    not exist for them). Rendered here, not raised: raising would end the request's database
    session before the error page's header reads the signed-in learner."""
    from app.auth.models import INSTRUCTOR

    if user is None:
        return RedirectResponse(f"/login?next={page}", status_code=303)
    if user.role != INSTRUCTOR:
        message = translate(locale, NOT_FOUND)
        return render(request, "web/error.html", status_code=404, locale=locale, message=message)
    return None
