"""Adding a language (docs/translating.md) never takes a lesson offline: a toy fourth locale,
"de", with two texts written (a lesson title and one hint level) and everything else missing.

The locale list is defined once (`grader.i18n.LOCALES`); a fresh interpreter adds "de" there
before anything imports it, as editing that line would, and serves a copy of the shipped lessons
that has the two German texts. Every lesson still loads and serves: the German title, the
English rest with the page's fallback notice, the untranslated texts as validator warnings (an
error only with `--strict`, which CI runs for the shipped locales).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from app.config import REPO_ROOT
from tests.content.test_shipped_lessons import COURSE_LESSONS

GERMAN_TITLE = "DDP-Grundlagen"
GERMAN_NUDGE = "Gib die ersten Indizes aus, die der Loader Rank 0 in Epoche 0 und 1 gibt."

SERVE = """
import json, sys
from pathlib import Path

import grader.i18n

if "de" not in grader.i18n.LOCALES:  # (once German is added for real, it is the real one)
    grader.i18n.LOCALES = (*grader.i18n.LOCALES, "de")  # the one line a new language adds
    grader.i18n.TRANSLATED_LOCALES = (*grader.i18n.TRANSLATED_LOCALES, "de")

from fastapi.testclient import TestClient

from app.content.__main__ import validate
from app.content.loader import load_catalog
from app.i18n import SUPPORTED_LOCALES
from app.main import create_app
from app.migrate import upgrade

lessons = Path(sys.argv[1])
upgrade(sys.argv[2])
catalog = load_catalog(lessons)
client = TestClient(create_app())
page = client.get("/lessons/ddp-fundamentals", params={"locale": "de"})
browser = client.get("/lessons/ddp-fundamentals", headers={"Accept-Language": "de-DE,de;q=0.9"})
api = client.get("/api/v1/lessons/ddp-fundamentals", params={"locale": "de"})
print(json.dumps({
    "supported": list(SUPPORTED_LOCALES),
    "lessons": list(catalog.lessons),
    "problems": [str(problem) for problem in catalog.problems],
    "warnings": [str(warning) for warning in catalog.warnings],
    "exit": validate(lessons),
    "exit_strict": validate(lessons, strict=True),
    "page": [page.status_code, page.headers.get("content-language"), page.text],
    "browser": browser.headers.get("content-language"),
    "api": [api.status_code, api.json()],
    "course": client.get("/", params={"locale": "de"}).status_code,
}))
"""


def german_copy(tmp_path: Path) -> Path:
    lessons = tmp_path / "lessons"
    shutil.copytree(REPO_ROOT / "lessons", lessons)
    lesson = lessons / "02-ddp-fundamentals" / "lesson.yaml"
    text = lesson.read_text(encoding="utf-8")
    title = "  pt-BR: Fundamentos do DDP\n"
    nudge = "          pt-BR: Imprima os primeiros índices que o loader dá ao rank 0"
    assert text.count(title) == 1 and text.count(nudge) == 1
    text = text.replace(title, f"{title}  de: {GERMAN_TITLE}\n", 1)
    at = text.index("\n", text.index(nudge)) + 1
    text = text[:at] + f"          de: {GERMAN_NUDGE}\n" + text[at:]
    lesson.write_text(text, encoding="utf-8")
    return lessons


def test_a_partial_fourth_language_keeps_every_lesson_serving(tmp_path: Path) -> None:
    lessons = german_copy(tmp_path)
    env = {
        **os.environ,
        "RDV_LESSONS_DIR": str(lessons),
        "RDV_DATABASE_URL": f"sqlite:///{tmp_path / 'de.db'}",
    }
    done = subprocess.run(
        [sys.executable, "-c", SERVE, str(lessons), env["RDV_DATABASE_URL"]],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["supported"][-1] == "de"
    assert seen["lessons"] == COURSE_LESSONS  # none taken offline
    assert seen["problems"] == []
    assert seen["warnings"], "the missing German hint levels are reported"
    assert all("warning: has no de" in warning for warning in seen["warnings"])
    assert not any(GERMAN_NUDGE in warning for warning in seen["warnings"])
    assert (seen["exit"], seen["exit_strict"]) == (0, 1)

    status, language, html = seen["page"]
    assert (status, language) == (200, "de")
    assert '<html lang="de">' in html
    assert GERMAN_TITLE in html
    assert 'data-testid="fallback-notice"' in html  # the rest is in English, and it says so
    assert seen["browser"] == "de"  # a German browser gets it without asking
    status, lesson = seen["api"]
    assert status == 200 and lesson["title"] == GERMAN_TITLE
    assert "summary" in lesson["fallback_fields"]
    assert seen["course"] == 200
