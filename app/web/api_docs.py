"""`/docs` (Swagger UI) and `/redoc` (ReDoc): the API's reference pages, from this site alone.

FastAPI's own pages load their scripts from a CDN and start them with an inline `<script>`,
both of which the content security policy refuses (the pages rendered blank). These load the
copies vendored under static/vendor/ (their VERSION files say which release, from where, under
which licence) and start them from static/js/api-docs.js, which reads the document's address
from the page. Their policy (`DOCS_POLICY` in app/security_headers.py) adds only what the two
need: inline styles (both set style attributes) and, for ReDoc's search, a worker from blob:.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Rendezvous API: {title}</title>
{styles}
<script src="{script}" defer></script>
<script src="/static/js/api-docs.js" defer></script>
</head>
<body>
<div id="api-docs" data-viewer="{viewer}" data-openapi-url="/openapi.json"></div>
</body>
</html>
"""


def _page(title: str, script: str, viewer: str, styles: str = "") -> HTMLResponse:
    return HTMLResponse(_PAGE.format(title=title, styles=styles, script=script, viewer=viewer))


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    return _page(
        "Swagger UI",
        "/static/vendor/swagger-ui/swagger-ui-bundle.js",
        "swagger-ui",
        styles='<link rel="stylesheet" href="/static/vendor/swagger-ui/swagger-ui.css">',
    )


@router.get("/redoc")
def redoc() -> HTMLResponse:
    return _page("ReDoc", "/static/vendor/redoc/redoc.standalone.js", "redoc")
