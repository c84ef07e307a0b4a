"""What a person sees on the course page, a lesson on a desktop and the instructors' pages, in
Chromium (issue 38): one call to action on the course page and lesson buttons that differ; Next
in view on every card of lesson 1 at 1280x800; an "Instructor" header link for instructors only;
table headers and cells that never break mid-word (letter by letter on a tr phone); a legend for
the analytics bars; a by-language view that is not many screens of "<5"; a 2-node job's panes
that say which node."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.coach.models import CoachExchange
from app.config import REPO_ROOT
from app.content.loader import load_catalog
from app.db import make_engine
from tests.e2e.accounts import register_and_sign_in
from tests.e2e.conftest import LiveServer
from tests.e2e.test_accessibility import violations
from tests.e2e.test_instructor_struggles import make_instructor
from tests.e2e.test_live_panes import follow, launch, open_exercise, output

DESKTOP = {"viewport": {"width": 1280, "height": 800}}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
LESSON = "data-vs-model-parallelism"
CARDS = load_catalog(REPO_ROOT / "lessons").lessons[LESSON].lesson.cards()

# Every word (a run of letters and digits) of every table cell on one line: a word whose range
# lies on two lines was broken mid-word.
BROKEN_WORDS = """table => {
  const broken = [];
  const walker = document.createTreeWalker(table, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const cell = node.parentElement.closest("th, td");
    if (!cell || !cell.getClientRects().length) continue;
    for (const match of node.data.matchAll(/[\\p{L}\\p{N}_]+/gu)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const rects = [...range.getClientRects()].filter(r => r.width > 0);
      const lines = new Set(rects.map(r => Math.round(r.top)));
      if (lines.size > 1) broken.push(match[0]);
    }
  }
  return broken;
}"""


@pytest.fixture(params=["en", "tr"])
def locale(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def new_page(browser: Any, server: LiveServer, locale: str, options: dict[str, Any]) -> Any:
    context = browser.new_context(base_url=server.url, locale=locale, bypass_csp=True, **options)
    context.add_cookies([{"name": "rdv_locale", "value": locale, "url": server.url}])
    context.set_default_timeout(20_000)
    return context.new_page()


@pytest.fixture(params=["desktop", "phone"])
def device(request: pytest.FixtureRequest) -> dict[str, Any]:
    return DESKTOP if request.param == "desktop" else PHONE


@pytest.fixture
def screen(
    browser: Any, live_server: LiveServer, locale: str, device: dict[str, Any]
) -> Iterator[Any]:
    page = new_page(browser, live_server, locale, device)
    yield page
    page.context.close()


def test_the_course_page_has_one_call_to_action_in_view(screen: Any) -> None:
    screen.goto("/")
    cta = screen.locator('[data-testid="course-cta"]')
    box = cta.bounding_box()
    height = screen.viewport_size["height"]
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height
    assert (
        cta.get_attribute("href")
        == f"/lessons/{load_catalog(REPO_ROOT / 'lessons').course.lessons[0]}"
    )
    buttons = screen.locator(".lesson-card__action a").all_inner_texts()
    assert len(buttons) >= 4
    assert len(set(buttons)) == len(buttons), buttons  # no four identical "Start"


def test_the_course_counts_the_cards_the_lesson_counts(screen: Any) -> None:
    screen.goto("/")
    eyebrow = screen.locator(f'.lesson-card:has(a[href="/lessons/{LESSON}"]) .eyebrow')
    assert str(len(CARDS)) in eyebrow.inner_text().split("·")[-1]
    screen.goto(f"/lessons/{LESSON}")
    assert str(len(CARDS)) in screen.locator("#step-status").inner_text()


def test_next_stays_in_view_on_every_card_of_lesson_1_on_a_desktop(page: Any) -> None:
    """Issue 38: on card 6 ("Processes and collectives") Next was at y = 947 of 800."""
    page.goto(f"/lessons/{LESSON}")
    next_button = page.locator('[data-step-nav="next"]')
    for index in range(1, len(CARDS)):
        page.wait_for_function(f"document.getElementById('steps').dataset.current === '{index}'")
        box = next_button.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 800, (index, box)
        next_button.click()


def test_only_instructors_get_the_instructor_link(browser: Any, live_server: LiveServer) -> None:
    page = new_page(browser, live_server, "en", DESKTOP)
    try:
        email = f"teacher-{uuid.uuid4().hex[:12]}@example.org"
        register_and_sign_in(page, name="Iris", email=email, password="correct horse battery")
        page.goto("/")
        link = page.locator('[data-testid="instructor-link"]')
        assert link.count() == 0  # a learner
        make_instructor(live_server, email)
        page.goto("/")
        assert link.is_visible()
        link.click()
        page.locator('[data-role="analytics-steps"]').wait_for()
        page.locator(".instructor-nav").get_by_role("link", name="Questions to the coach").click()
        page.locator('[data-role="struggles-total"]').wait_for()
    finally:
        page.context.close()


def ask_about_a_failed_run(server: LiveServer, email: str) -> None:
    """A question about a run that failed two checks, stored as the coach stores it."""
    engine = make_engine(server.database_url)
    with Session(engine) as session:
        user = session.scalars(select(User).where(User.email == email)).one()
        session.add(
            CoachExchange(
                user_id=user.id,
                lesson_id="ddp-fundamentals",
                exercise="ddp-fundamentals/train",
                failed_checks=[
                    {"id": "sampler.set_epoch", "title": "Each epoch reshuffles the data"},
                    {"id": "ckpt.rank0_only", "title": "Only rank 0 writes the checkpoint"},
                ],
                locale="tr",
                question="Neden?",
                answer="…",
                sources=[],
                provider="builtin",
            )
        )
        session.commit()
    engine.dispose()


def test_instructor_tables_keep_words_whole_and_the_split_stays_short(
    screen: Any, live_server: LiveServer
) -> None:
    email = f"teacher-{uuid.uuid4().hex[:12]}@example.org"
    register_and_sign_in(screen, name="Iris", email=email, password="correct horse battery")
    make_instructor(live_server, email)
    ask_about_a_failed_run(live_server, email)
    screen.goto("/instructor/coach")
    tables = screen.locator("table.struggles")
    assert tables.count() == 2
    for n in range(2):
        assert tables.nth(n).evaluate(BROKEN_WORDS) == [], n
    assert violations(screen) == []  # a table that scrolls sideways is reachable by keyboard
    checks = screen.locator('[data-role="struggles-checks"] tbody tr')
    assert checks.count() == 1  # one question: counted once, under the run's first failed check
    screen.goto("/instructor/analytics?lesson_id=ddp-fundamentals")
    steps = screen.locator('[data-role="analytics-steps"]')
    assert steps.evaluate(BROKEN_WORDS) == []
    legend = screen.locator('[data-role="analytics-legend"]')
    assert legend.is_visible() and legend.locator("svg").count() == 2
    assert violations(screen) == []
    assert screen.evaluate("document.documentElement.scrollWidth") <= screen.viewport_size["width"]
    plain = screen.evaluate("document.documentElement.scrollHeight")
    screen.goto("/instructor/analytics?lesson_id=ddp-fundamentals&by_locale=true")
    split = screen.evaluate("document.documentElement.scrollHeight")
    assert split < 1.5 * plain, (plain, split)  # not a screen of "<5" per language
    screen.goto("/account/devices")
    assert screen.locator("table.devices").evaluate(BROKEN_WORDS) == []


def test_a_two_node_job_s_panes_say_which_node(page: Any) -> None:
    section = open_exercise(
        page,
        "/lessons/torchrun-launch#exercise-env-launch",
        'section.sub[data-exercise="torchrun-launch/env-launch"]',
    )
    events = [
        ("status", launch(1, 2, "first")),
        ("output", output(1, 1, "one machine rank 1")),
        ("status", launch(2, 2, "multinode", nnodes=2)),
        ("output", output(2, 0, "two nodes rank 0")),
        ("output", output(2, 1, "two nodes rank 1")),
    ]
    follow(page, section, events)
    two_nodes = section.locator('.sub__launch-group[data-launch="2"] .sub__rank h5')
    two_nodes.nth(1).wait_for()
    assert two_nodes.all_inner_texts() == [
        "Rank 0 of 2 on node 0 (LOCAL_RANK 0)",
        "Rank 1 of 2 on node 1 (LOCAL_RANK 0)",
    ]
    one = section.locator('.sub__launch-group[data-launch="1"] .sub__rank h5').inner_text()
    assert one == "Rank 1 of 2"


def test_a_resuming_launch_says_so_in_portuguese(browser: Any, live_server: LiveServer) -> None:
    page = new_page(browser, live_server, "pt-BR", DESKTOP)
    try:
        section = open_exercise(
            page,
            "/lessons/syncbn-sharded-state#exercise-fsdp-reshard",
            'section.sub[data-exercise="syncbn-sharded-state/fsdp-reshard"]',
        )
        second = {**launch(2, 3, "resume"), "world_size": 3, "previous_world_size": 2}
        events = [("status", launch(1, 3, "first")), ("status", second)]
        follow(page, section, [*events, ("output", output(2, 0, "resumed at step 3"))])
        line = section.locator('.sub__launch-group[data-launch="2"] .sub__launch')
        line.wait_for()
        text = line.inner_text()
        assert "retomando o checkpoint que a execução anterior salvou com 2 processos" in text
        assert "fixado em 2" not in text
    finally:
        page.context.close()
