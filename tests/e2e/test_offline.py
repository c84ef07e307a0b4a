"""In Chromium, with `context.set_offline`: the site is installable; a lesson opened online is
read offline after a reload (the next lesson too), other pages get the offline page (axe: no
serious violation); steps and quiz answers made offline reach the server when the connection
returns, merged with another device's progress; a draft changed on two devices asks the learner
to choose; Submit says it needs the network. And a visitor's progress (issue 22, point 4): every
step read and every question answered stay so after registering, welcome notice on screen. The
cards are walked in the lesson's own sequence, read from its YAML."""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from app.config import REPO_ROOT
from app.content.loader import load_catalog
from tests.e2e.accounts import register, sign_in_after_registering
from tests.e2e.conftest import CHROMIUM, LiveServer, start_live_server, stop_live_server
from tests.e2e.test_accessibility import violations

LESSON = "ddp-fundamentals"
NEXT_LESSON = "syncbn-sharded-state"
EXERCISE = "ddp-fundamentals/train"
SECTION = f'section.sub[data-exercise="{EXERCISE}"]'
PASSWORD = "correct horse battery staple"
# Lesson 2 as its author ordered it: (kind, id) per card, and each question's right choice.
LESSON_MODEL = load_catalog(REPO_ROOT / "lessons").lessons[LESSON].lesson
CARDS = LESSON_MODEL.cards()
RIGHT = {question.id: question.answer for question in LESSON_MODEL.quiz}
FIRST_QUESTION = next(n for n, (kind, _) in enumerate(CARDS, 1) if kind == "question")
EXERCISE_CARD = "#exercise-" + EXERCISE.split("/")[1]


def api(base_url: str, method: str, path: str, token: str, body: Any = None) -> Any:
    """The REST API as another device calls it: a bearer token, JSON."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base_url + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def other_device(base_url: str, email: str) -> str:
    form = urllib.parse.urlencode(
        {"username": email, "password": PASSWORD, "device_name": "phone"}
    ).encode()
    with urllib.request.urlopen(f"{base_url}/api/v1/auth/token", data=form, timeout=30) as r:
        return str(json.loads(r.read())["access_token"])


def put_draft(base_url: str, token: str, code: str) -> None:
    api(base_url, "PUT", f"/api/v1/drafts/{EXERCISE}", token, {"code": code})


def new_learner(page: Any, next_path: str) -> str:
    email = f"e2e-{uuid.uuid4().hex[:12]}@example.org"
    register(page, name="Ada", email=email, password=PASSWORD, next=next_path)
    sign_in_after_registering(page, email=email, password=PASSWORD)
    page.wait_for_load_state()
    return email


def wait_until(page: Any, predicate: str, timeout_s: float = 30) -> None:
    """Poll an async predicate (`page.wait_for_function` takes a returned Promise as truthy)."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(predicate):
        assert time.monotonic() < deadline, f"still false after {timeout_s} s: {predicate}"
        page.wait_for_timeout(50)


def outbox_empty(page: Any) -> None:
    wait_until(page, "() => RdvClient.pending().then(events => events.length === 0)")


def worker_ready(page: Any) -> None:
    page.wait_for_function("() => navigator.serviceWorker.controller !== null", timeout=30_000)


def saved_pages(page: Any) -> list[str]:
    paths: list[str] = page.evaluate(
        """async () => {
          const out = [];
          for (const name of await caches.keys()) {
            if (!name.startsWith("rdv-pages-")) continue;
            const cache = await caches.open(name);
            for (const r of await cache.keys()) out.push(new URL(r.url).pathname);
          }
          return out;
        }"""
    )
    return paths


def wait_saved(page: Any, *paths: str) -> None:
    deadline = time.monotonic() + 30
    while not set(paths) <= set(saved_pages(page)):
        assert time.monotonic() < deadline, saved_pages(page)
        page.wait_for_timeout(200)


def test_the_site_is_installable(browser: Any, live_server: LiveServer, tmp_path: Path) -> None:
    """Chromium's own installability check, in a profile on disk (an incognito context, as
    Playwright's usual ones are, can never install)."""
    context = browser.browser_type.launch_persistent_context(
        str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, base_url=live_server.url
    )
    try:
        page = context.new_page()
        page.goto("/")
        worker_ready(page)
        cdp = context.new_cdp_session(page)
        manifest = cdp.send("Page.getAppManifest")
        assert not manifest["errors"], manifest["errors"]
        assert json.loads(manifest["data"])["display"] == "standalone"
        errors = cdp.send("Page.getInstallabilityErrors")["installabilityErrors"]
        assert errors == [], errors
        page.reload()  # the browser offers to install: the header's button shows
        page.locator("[data-install]").filter(has_text="Install the app").wait_for()
    finally:
        context.close()


def test_a_lesson_opened_online_is_read_offline_and_the_rest_gets_the_offline_page(
    browser: Any, live_server: LiveServer
) -> None:
    context = browser.new_context(base_url=live_server.url, bypass_csp=True)  # axe at the end
    try:
        read_offline(context.new_page())
    finally:
        context.close()


def read_offline(page: Any) -> None:
    page.goto(f"/lessons/{LESSON}")
    worker_ready(page)
    wait_saved(page, f"/lessons/{LESSON}", f"/lessons/{NEXT_LESSON}")
    title = page.inner_text("#lesson-title")

    page.context.set_offline(True)
    page.reload()
    assert page.inner_text("#lesson-title") == title
    first = page.get_attribute("#steps", "data-current")
    page.click('[data-step-nav="next"]')  # the cards work offline (styles and scripts cached)
    assert page.get_attribute("#steps", "data-current") == str(int(first or "1") + 1)
    # site.css came from the cache: its rules apply.
    assert page.evaluate("getComputedStyle(document.querySelector('.skip-link')).position") == (
        "absolute"
    )

    page.goto(f"/lessons/{NEXT_LESSON}")  # never opened: saved as the next lesson
    assert page.get_attribute("#lesson", "data-lesson-id") == NEXT_LESSON

    page.goto("/lessons/torchrun-launch")  # neither opened nor next: the offline page
    page.wait_for_selector("#offline-title")
    saved = page.locator("[data-offline-lessons] a")
    saved.nth(2).wait_for()  # the course, and the two lessons saved
    assert violations(page) == []
    page.context.set_offline(False)


def test_steps_and_answers_made_offline_reach_the_server_merged_with_another_device(
    page: Any, live_server: LiveServer
) -> None:
    email = new_learner(page, f"/lessons/{LESSON}")
    worker_ready(page)
    steps = page.eval_on_selector_all(
        ".step-card[data-step-id]", "c => c.map(x => x.dataset.stepId)"
    )
    token = other_device(live_server.url, email)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    phone = [
        {
            "id": f"phone-{i}",
            "type": "step_completed",
            "lesson_id": LESSON,
            "step_id": step,
            "at": now,
        }
        for i, step in enumerate(steps[5:7])
    ]
    api(live_server.url, "POST", "/api/v1/progress/events", token, {"events": phone})

    page.goto(f"/lessons/{LESSON}?step=1")
    outbox_empty(page)
    page.context.set_offline(True)
    assert [kind for kind, _ in CARDS[:3]] == ["step"] * 3  # two steps read on the way
    page.click('[data-step-nav="next"]')
    page.click('[data-step-nav="next"]')
    # On to the first question's card: the step left (the third) is done too.
    page.locator(f'[data-step-link="{FIRST_QUESTION}"]').click()
    form = page.locator(".step-card--quiz:not([hidden]) form.quiz-question")
    question_id = CARDS[FIRST_QUESTION - 1][1]
    form.locator(f'input[name="choice"][value="{RIGHT[question_id]}"]').check()
    form.locator('button[type="submit"]').click()
    feedback = form.locator(".quiz-feedback")
    feedback.filter(has_text="offline").wait_for()
    waiting = page.evaluate("RdvClient.pending().then(e => e.map(x => x.type))")
    assert waiting.count("step_completed") == 3 and "quiz_answered" in waiting, waiting
    server = api(live_server.url, "GET", "/api/v1/progress", token)["lessons"][LESSON]
    assert sorted(server["completed_steps"]) == sorted(steps[5:7])  # nothing arrived yet

    started = time.monotonic()
    page.context.set_offline(False)
    outbox_empty(page)
    drained = time.monotonic() - started
    feedback.locator(".verdict--correct").wait_for()  # checked by the server, shown then
    print(f"outbox drained {drained:.2f} s after reconnecting")

    merged = api(live_server.url, "GET", "/api/v1/progress", token)["lessons"][LESSON]
    assert sorted(merged["completed_steps"]) == sorted([*steps[:3], *steps[5:7]])
    question = page.get_attribute(".step-card--quiz:not([hidden])", "data-question-id")
    assert merged["quiz"]["answers"][question]["correct"] is True
    page.reload()  # the page shows the merged state
    done = page.eval_on_selector_all(".step-card--completed", "c => c.map(x => x.dataset.stepId)")
    assert sorted(done) == sorted([*steps[:3], *steps[5:7]])


def test_a_draft_changed_on_two_devices_asks_which_to_keep(
    page: Any, live_server: LiveServer
) -> None:
    email = new_learner(page, f"/lessons/{LESSON}")
    page.goto(f"/lessons/{LESSON}{EXERCISE_CARD}")  # a `next` cannot carry the card's #fragment
    section = page.locator(SECTION)
    section.locator(".cm-content").wait_for()
    worker_ready(page)
    page.context.set_offline(True)
    submit = section.locator('[data-role="submit"]')
    submit.filter(has_text="Offline").wait_for()  # the button says it needs the network
    section.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("\nprint('from the laptop')\n")
    section.locator('[data-role="draft"]').filter(has_text="offline").wait_for()
    assert submit.get_attribute("aria-disabled") == "true"
    submit.click(force=True)  # pressed anyway: it says why nothing was sent
    assert "offline" in section.locator('[data-role="error"]').inner_text()

    token = other_device(live_server.url, email)
    put_draft(live_server.url, token, "print('phone')\n")
    page.context.set_offline(False)
    conflict = section.locator('[data-role="conflict"]')
    conflict.wait_for()
    assert (
        api(live_server.url, "GET", f"/api/v1/drafts/{EXERCISE}", token)["code"]
        == "print('phone')\n"
    )
    section.locator('[data-role="see-both"]').click()
    assert section.locator('[data-role="theirs"]').inner_text() == "print('phone')\n"
    section.locator('[data-role="keep-mine"]').click()
    section.locator('[data-role="draft"]').filter(has_text="Draft saved.").wait_for()
    kept = api(live_server.url, "GET", f"/api/v1/drafts/{EXERCISE}", token)["code"]
    assert "print('from the laptop')" in kept
    assert conflict.is_hidden()


def test_a_visitor_s_progress_is_kept_at_sign_up(page: Any) -> None:
    steps, questions = len(LESSON_MODEL.steps), len(LESSON_MODEL.quiz)
    page.goto(f"/lessons/{LESSON}?step=1")
    assert page.locator(".step-card[data-step-id]").count() == steps
    for index, (kind, card_id) in enumerate(CARDS, 1):
        if index > 1:
            page.click('[data-step-nav="next"]')
        if kind == "question":
            form = page.locator(".step-card--quiz:not([hidden]) form.quiz-question")
            form.locator(f'input[name="choice"][value="{RIGHT[card_id]}"]').check()
            form.locator('button[type="submit"]').click()
            form.locator(".verdict--correct").wait_for()
    wait_until(
        page,
        "() => RdvClient.pending()"
        f".then(e => e.filter(x => x.type === 'quiz_answered').length === {questions})",
    )

    new_learner(page, "/")
    page.wait_for_selector(".notice--welcome")
    lesson = page.locator(f'li.lesson-card:has(h3 a[href="/lessons/{LESSON}"])')
    lesson.filter(has_text=f"{steps} of {steps} steps done").wait_for()
    assert f"{questions} of {questions} questions answered correctly" in lesson.inner_text()
    welcome = page.locator(".notice--welcome")
    box = welcome.bounding_box()
    assert box is not None and 0 <= box["y"] < page.viewport_size["height"]
    assert page.evaluate("RdvClient.pending().then(e => e.length)") == 0


def test_the_whole_course_is_kept_for_offline_reading(page: Any) -> None:
    """Every lesson opened once (signed in, so with the editor) is saved; what it costs."""
    new_learner(page, "/")
    worker_ready(page)
    lessons = page.eval_on_selector_all(
        "li.lesson-card h3 a", "links => links.map(a => a.getAttribute('href'))"
    )
    assert len(lessons) == 4
    for href in lessons:
        page.goto(f"{href}#exercises")  # the lesson's first exercise card: the editor loads
        page.locator(".step-card--exercise:not([hidden]) .cm-content").first.wait_for()
    wait_saved(page, "/", *lessons)
    used = page.evaluate(
        """async () => {
          let bytes = 0, entries = 0;
          for (const name of await caches.keys()) {
            const cache = await caches.open(name);
            for (const request of await cache.keys()) {
              bytes += (await (await cache.match(request)).blob()).size;
              entries += 1;
            }
          }
          const estimate = await navigator.storage.estimate();
          return { bytes, entries, usage: estimate.usage };
        }"""
    )
    print(f"offline storage for the whole course in one language: {used}")
    assert used["entries"] >= len(lessons) + 10


def test_a_new_worker_version_carries_the_saved_lessons_over_and_drops_old_caches(
    page: Any,
) -> None:
    """An older version's caches (a lesson saved, a stale shell) meet a newly installed worker:
    the lesson is fetched afresh into the new version's cache and the old caches are gone."""
    page.goto("/")
    worker_ready(page)
    page.evaluate(
        """async () => {
          for (const name of await caches.keys()) await caches.delete(name);
          const html = { headers: { "Content-Type": "text/html" } };
          const pages = await caches.open("rdv-pages-0ld");
          await pages.put("/lessons/torchrun-launch", new Response("<p>old copy</p>", html));
          await (await caches.open("rdv-shell-0ld")).put("/offline", new Response("old", html));
          // Another script URL: the browser installs it as a new worker (same scope).
          await navigator.serviceWorker.register("/sw.js?install=again");
        }"""
    )
    wait_until(page, "() => caches.keys().then(names => !names.some(n => n.endsWith('-0ld')))")
    wait_saved(page, "/lessons/torchrun-launch")
    page.context.set_offline(True)
    page.goto("/lessons/torchrun-launch")
    assert page.get_attribute("#lesson", "data-lesson-id") == "torchrun-launch"  # not "old copy"
    page.context.set_offline(False)


def test_a_lesson_edited_by_an_instructor_replaces_the_saved_copy_on_the_next_online_visit(
    browser: Any, tmp_path: Path
) -> None:
    lessons = tmp_path / "lessons"
    shutil.copytree(REPO_ROOT / "lessons", lessons)
    server = start_live_server(tmp_path, {"RDV_LESSONS_DIR": str(lessons)})
    context = browser.new_context(base_url=server.url)
    try:
        page = context.new_page()
        page.goto(f"/lessons/{LESSON}")
        worker_ready(page)
        wait_saved(page, f"/lessons/{LESSON}")
        before = page.inner_text("#lesson-title")
        lesson_file = next(lessons.glob(f"*-{LESSON}/lesson.yaml"))
        text = lesson_file.read_text("utf-8")
        lesson_file.write_text(text.replace(before, f"{before} (edited)", 1), "utf-8")
        deadline = time.monotonic() + 30  # the server looks for edits once a second
        while page.inner_text("#lesson-title") != f"{before} (edited)":
            assert time.monotonic() < deadline, "the edit never showed online"
            page.wait_for_timeout(300)
            page.reload()  # online: the new text, and the saved copy replaced
        wait_until(
            page,  # the copy is written just after the page is answered
            f"""() => caches.match("/lessons/{LESSON}")
                .then(r => r && r.text()).then(t => Boolean(t && t.includes("(edited)")))""",
        )
        context.set_offline(True)
        page.reload()
        assert page.inner_text("#lesson-title") == f"{before} (edited)"
    finally:
        context.close()
        stop_live_server(server)


def test_signing_out_forgets_the_saved_pages(page: Any) -> None:
    """They showed that learner's progress: the next person on the device must not see it."""
    new_learner(page, f"/lessons/{LESSON}")
    worker_ready(page)
    wait_saved(page, f"/lessons/{LESSON}")
    page.locator('.account-nav button[type="submit"]').click()  # Sign out
    page.wait_for_selector('meta[name="rdv-account"][content="visitor"]', state="attached")
    wait_until(
        page,
        """() => caches.keys().then(async names => {
          for (const name of names) {
            const cache = await caches.open(name);
            if ((await cache.keys()).some(r => new URL(r.url).pathname.startsWith("/lessons/")))
              return false;
          }
          return true;
        })""",
    )


def indicator_on_screen(page: Any) -> bool:
    line = page.locator("[data-offline-indicator]")
    if not line.is_visible():
        return False
    box = line.bounding_box()
    return box is not None and 0 <= box["y"] < page.viewport_size["height"]


def test_an_unsaved_page_opened_offline_keeps_the_saved_lessons_and_the_sync(
    page: Any, live_server: LiveServer
) -> None:
    """Issue 38: the offline page (kept for a visitor) was taken for a sign-out; every saved
    lesson was forgotten and nothing was sent on reconnecting. Also: ?step= is honoured offline
    and a line at the top says the page is offline."""
    email = new_learner(page, f"/lessons/{LESSON}")
    worker_ready(page)
    steps = page.eval_on_selector_all(
        ".step-card[data-step-id]", "c => c.map(x => x.dataset.stepId)"
    )
    assert [kind for kind, _ in CARDS[:3]] == ["step"] * 3
    page.goto(f"/lessons/{LESSON}?step=1")
    wait_saved(page, f"/lessons/{LESSON}", f"/lessons/{NEXT_LESSON}")
    outbox_empty(page)
    assert not indicator_on_screen(page)

    page.context.set_offline(True)
    page.reload()
    assert indicator_on_screen(page)
    page.click('[data-step-nav="next"]')  # step 1 done, offline

    page.goto("/lessons/torchrun-launch")  # not saved: the offline page
    page.wait_for_selector("#offline-title")
    page.locator("[data-offline-lessons] a").nth(2).wait_for()  # still listed
    page.goto(f"/lessons/{LESSON}?step=2")  # the saved copy was rendered at step 1
    assert page.get_attribute("#lesson", "data-lesson-id") == LESSON
    assert page.get_attribute("#steps", "data-current") == "2"
    assert page.locator(f"#step-{steps[1]}").is_visible()
    assert indicator_on_screen(page)
    page.click('[data-step-nav="next"]')  # step 2 done, offline
    assert {f"/lessons/{LESSON}", f"/lessons/{NEXT_LESSON}"} <= set(saved_pages(page))
    waiting = page.evaluate("RdvClient.pending().then(e => e.map(x => x.type))")
    assert waiting.count("step_completed") == 2, waiting

    page.goto("/lessons/torchrun-launch")  # reconnect on the offline page itself
    page.wait_for_selector("#offline-title")
    page.context.set_offline(False)
    outbox_empty(page)
    token = other_device(live_server.url, email)
    server = api(live_server.url, "GET", "/api/v1/progress", token)["lessons"][LESSON]
    assert sorted(server["completed_steps"]) == sorted(steps[:2])
    page.goto(f"/lessons/{LESSON}")
    assert not indicator_on_screen(page)
