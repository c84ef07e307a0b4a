"""The installable app: the web app manifest, the service worker and the offline page.

- `/manifest.webmanifest`: name and description in the request's locale (`lang` says which),
  the drawn icons, the theme, `start_url` and `display: standalone`.
- `/sw.js`: `static/js/sw.js` preceded by one line, `self.RDV = {version, shell, client}`: the
  shell's content-hashed URLs (`static_url`) and a version hashed from them and from the worker's
  own text. A changed asset or worker is a new version: the browser installs it, and it drops
  the caches of every older one. Served from the root so that its scope is the whole site, and
  never cached by HTTP (`no-cache`), so that browsers find a new version on the next visit.
- `/offline`: what the worker shows for a page that is not cached while the network is down.
"""

from __future__ import annotations

import hashlib
import json

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.i18n import LocaleDep, translate
from app.templating import STATIC_DIR, render, static_url

router = APIRouter(include_in_schema=False)

THEME_COLOUR = "#0b5cad"
BACKGROUND_COLOUR = "#ffffff"
# The app shell, precached when the worker installs: every page's stylesheet and scripts,
# the lesson page's, the icons. The editor bundle is cached when a learner first loads it.
SHELL_ASSETS = (
    "css/site.css",
    "css/coach.css",
    "js/rdv-client.js",
    "js/pwa.js",
    "js/progress.js",
    "js/lesson.js",
    "js/coach.js",
    "icons/icon.svg",
    "icons/icon-192.png",
)
SHELL_PAGES = ("/", "/offline")
WORKER_SOURCE = STATIC_DIR / "js" / "sw.js"


def manifest(locale: str) -> dict[str, object]:
    """The web app manifest in `locale`."""
    return {
        "id": "/",
        "name": translate(locale, "Rendezvous: PyTorch distributed training"),
        "short_name": "Rendezvous",
        "description": translate(
            locale, "Rendezvous teaches PyTorch distributed training by running your code for real."
        ),
        "lang": locale,
        "dir": "ltr",
        "start_url": "/",
        "scope": "/",
        "display": "standalone",
        "theme_color": THEME_COLOUR,
        "background_color": BACKGROUND_COLOUR,
        "icons": [
            {"src": static_url("icons/icon.svg"), "sizes": "any", "type": "image/svg+xml"},
            {"src": static_url("icons/icon-192.png"), "sizes": "192x192", "type": "image/png"},
            {"src": static_url("icons/icon-512.png"), "sizes": "512x512", "type": "image/png"},
            {
                "src": static_url("icons/icon-512.png"),
                "sizes": "512x512",
                "type": "image/png",
                "purpose": "maskable",
            },
        ],
    }


def worker_script() -> str:
    """The service worker's text: its settings line, then static/js/sw.js."""
    source = WORKER_SOURCE.read_text("utf-8")
    shell = [*SHELL_PAGES, *(static_url(path) for path in SHELL_ASSETS)]
    version = hashlib.sha256("\n".join([source, *shell]).encode("utf-8")).hexdigest()[:12]
    settings = {"version": version, "shell": shell, "client": static_url("js/rdv-client.js")}
    return f"self.RDV = {json.dumps(settings)};\n{source}"


@router.get("/manifest.webmanifest")
def read_manifest(locale: LocaleDep) -> Response:
    return JSONResponse(
        manifest(locale),
        media_type="application/manifest+json",
        headers={"Cache-Control": "no-cache", "Content-Language": locale, "Vary": "Cookie"},
    )


@router.get("/sw.js")
def read_worker() -> Response:
    return Response(
        worker_script(),
        media_type="text/javascript; charset=utf-8",
        headers={"Cache-Control": "no-cache"},
    )


@router.get("/offline")
def offline_page(request: Request, locale: LocaleDep) -> Response:
    return render(request, "web/offline.html", locale=locale)
