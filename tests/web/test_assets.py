"""Static assets: content-hashed URLs, gzip for text, a year of caching only for versioned URLs,
and each script of the lesson page once, the editor's after the step and quiz scripts and only
for a learner who can submit (a visitor gets the starter code read-only)."""

from __future__ import annotations

import gzip
import hashlib
import html
import re
from urllib.parse import unquote

from fastapi.testclient import TestClient

from app.assets import IMMUTABLE
from app.config import REPO_ROOT
from app.templating import static_url
from tests.auth.factories import browser_sign_up


def test_versioned_urls_carry_the_content_hash() -> None:
    digest = hashlib.sha256((REPO_ROOT / "static/js/lesson.js").read_bytes()).hexdigest()
    assert static_url("js/lesson.js") == f"/static/js/lesson.js?v={digest[:12]}"


def test_text_assets_are_gzipped_and_cached_for_a_year(client: TestClient) -> None:
    url = static_url("vendor/codemirror.js")
    response = client.get(url, headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert response.headers["cache-control"] == IMMUTABLE
    assert "Accept-Encoding" in response.headers["vary"]
    raw = (REPO_ROOT / "static/vendor/codemirror.js").read_bytes()
    assert response.content == raw  # the client decoded it
    compressed = int(response.headers["content-length"])
    assert compressed == len(gzip.compress(raw, compresslevel=9, mtime=0))
    assert compressed < len(raw) / 2
    again = client.get(
        url, headers={"Accept-Encoding": "gzip", "If-None-Match": response.headers["etag"]}
    )
    assert again.status_code == 304


def test_unversioned_or_uncompressed_requests_revalidate(client: TestClient) -> None:
    plain = client.get("/static/css/site.css", headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200
    assert "content-encoding" not in plain.headers
    assert plain.headers["cache-control"] == "no-cache"
    assert plain.content == (REPO_ROOT / "static/css/site.css").read_bytes()


# Every lesson page's scripts, visitor or learner: the offline client and the progress recorder
# too (a visitor's steps and answers are kept on the device until they sign up or in).
LESSON_PAGE_SCRIPTS = [
    "js/rdv-client.js",
    "js/pwa.js",
    "js/progress.js",
    "js/lesson.js",
    "js/coach.js",
]


def scripts_of(page: str) -> list[str]:
    return re.findall(r'<script src="/static/([^"?]+)\?v=[0-9a-f]{12}" defer>', page)


def test_a_visitor_gets_the_starter_read_only_and_no_editor(client: TestClient) -> None:
    page = client.get("/lessons/ddp-fundamentals").text
    assert scripts_of(page) == LESSON_PAGE_SCRIPTS
    assert "submissions.css" not in page and "<textarea" not in page
    preview = re.search(r'<section class="exercise-preview" id="ex-train".*?</section>', page, re.S)
    assert preview is not None
    assert re.search(r'<pre class="code exercise-preview__code" tabindex="0"', preview.group(0))
    links = dict(re.findall(r'href="/(login|register)\?next=([^"]+)"', preview.group(0)))
    back = "/lessons/ddp-fundamentals#ex-train"  # sign in, then back to this exercise
    assert {page: unquote(target) for page, target in links.items()} == {
        "login": back,
        "register": back,
    }
    assert "Sign in to run it." in preview.group(0)
    starter = (REPO_ROOT / "lessons/02-ddp-fundamentals/exercises/train/starter.py").read_text()
    shown = re.search(
        r"<pre class=\"code exercise-preview__code\"[^>]*>(.*?)</pre>", preview.group(0), re.S
    )
    assert shown is not None
    assert html.unescape(re.sub(r"<[^>]+>", "", shown.group(1))).strip() == starter.strip()


def test_a_learner_s_lesson_page_loads_each_script_once_editor_last(client: TestClient) -> None:
    browser_sign_up(client)
    page = client.get("/lessons/ddp-fundamentals").text
    assert scripts_of(page) == [
        *LESSON_PAGE_SCRIPTS,
        "vendor/codemirror.js",
        "js/submit.js",
    ]
    assert page.count("css/submissions.css") == 1
    assert page.count('<section class="sub"') == page.count("data-exercise-id=")
    course = client.get("/").text
    assert "codemirror" not in course and "submissions.css" not in course
