"""Markdown to HTML for lesson texts: CommonMark, raw HTML escaped, code highlighted by Pygments."""

from __future__ import annotations

from functools import lru_cache

from markdown_it import MarkdownIt
from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

_FORMATTER = HtmlFormatter(nowrap=True, classprefix="hl-")


def highlight_code(code: str, language: str = "python") -> str:
    """The code as HTML spans (no <pre>); plain escaped text for an unknown language."""
    try:
        lexer = get_lexer_by_name(language or "text")
    except ClassNotFound:
        return str(escape(code))
    return str(highlight(code, lexer, _FORMATTER))


def _highlight_fence(code: str, language: str, _attrs: str) -> str:
    return highlight_code(code, language) if language else ""


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # html=False: raw HTML in a lesson is shown as text, never injected into the page.
    return MarkdownIt("commonmark", {"html": False, "highlight": _highlight_fence}).enable("table")


def render_markdown(source: str) -> Markup:
    return Markup(_parser().render(source))


def render_inline(source: str) -> Markup:
    """One line of Markdown (code spans, emphasis, links) without a surrounding paragraph."""
    return Markup(_parser().renderInline(source))


def render_code_block(code: str, language: str = "python") -> Markup:
    body = highlight_code(code.rstrip("\n"), language)
    return Markup(f'<pre class="code"><code class="language-{language}">{body}</code></pre>')
