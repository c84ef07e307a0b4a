"""The live run on the page, in Chromium: each launch's output in its own panes (lesson 4's
restarted run after its reference, the 2-node job), a line after 10 s of silence that says what
ranks wait for, the end of the Python traceback first in a crashed rank's pane, a result page
without console errors (the sampler legend's colours come from classes, not inline styles the
CSP refuses), and "rank N, line L" that leaves Escape-then-Tab able to leave the editor.

The event stream is the one the API sends (`tests/e2e/test_submit.py` grades for real); here it
is served to the page's own EventSource by Playwright, so the page is tested on its own.
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import sign_up
from tests.e2e.results import failed_result

ELASTIC_URL = "/lessons/torchrun-launch"
ELASTIC = 'section.sub[data-exercise="torchrun-launch/elastic-resume"]'
TRAIN_URL = "/lessons/ddp-fundamentals"
TRAIN = 'section.sub[data-exercise="ddp-fundamentals/train"]'

TRACEBACK = """Traceback (most recent call last):
  File "main.py", line 40, in <module>
    main()
  File "main.py", line 31, in main
    dist.all_reduce(t)
    ^^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81, in wrapper
    return func(*args, **kwargs)
RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer
Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:672 (most recent \
call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in libc10.so)
frame #1: <unknown function> + 0x5a3c1e1 (0x7f in libtorch_cpu.so)
"""


def launch(index: int, count: int, reason_id: str, nnodes: int = 1) -> dict[str, Any]:
    return {
        "status": "launch",
        "index": index,
        "count": count,
        "world_size": 2,
        "nnodes": nnodes,
        "first_world_size": 2,
        "reason_id": reason_id,
        "reason": "",
        "attempt": 1,
    }


def output(index: int, rank: int, line: str) -> dict[str, Any]:
    return {"rank": rank, "line": line, "world_size": 2, "launch": index, "attempt": 1}


def stream(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(
        f"id: {n}\nevent: {name}\ndata: {json.dumps(data)}\n\n"
        for n, (name, data) in enumerate(events, 1)
    )


def open_exercise(page: Any, url: str, selector: str) -> Any:
    sign_up(page)
    page.goto(url)
    section = page.locator(selector)
    section.locator(".cm-content").wait_for()
    return section


def follow(page: Any, section: Any, events: list[tuple[str, dict[str, Any]]]) -> None:
    """Let the page follow a submission whose stored events are `events`."""
    body = stream(events)
    page.route(
        "**/api/v1/submissions/feed0000-0000-0000-0000-000000000000/events*",
        lambda route: route.fulfill(
            status=200, headers={"Content-Type": "text/event-stream"}, body=body
        ),
    )
    section.evaluate(
        "s => { s.rdvExercise.clearRun(); s.rdvExercise.setRunning(true);"
        " s.rdvExercise.follow('feed0000-0000-0000-0000-000000000000'); }"
    )


def test_each_launch_of_lesson_4_writes_in_its_own_panes(page: Any) -> None:
    section = open_exercise(page, ELASTIC_URL, ELASTIC)
    result = failed_result()
    result["ranks"][1].update(stack=TRACEBACK, exit_code=1)
    result["ranks"][0].update(stack=TRACEBACK, exit_code=0)  # crashed once, then restarted fine
    events = [
        ("status", launch(1, 3, "reference")),
        ("output", output(1, 0, "reference epoch 0")),
        ("output", output(1, 1, "reference rank 1")),
        ("status", launch(2, 3, "faults")),
        ("output", output(2, 0, "restarted epoch 0")),
        ("output", output(2, 1, "restarted rank 1")),
        ("status", launch(3, 3, "multinode", nnodes=2)),
        ("output", output(3, 0, "two nodes rank 0")),
        ("output", output(3, 1, "two nodes rank 1")),
        ("done", {"status": "done", "result": result}),
    ]
    follow(page, section, events)
    section.locator('[data-role="summary"]:not(:empty)').wait_for()
    groups = section.locator(".sub__launch-group")
    assert groups.count() == 3
    for index, words in ((1, "reference"), (2, "restarted"), (3, "two nodes")):
        group = section.locator(f'.sub__launch-group[data-launch="{index}"]')
        heading = group.locator(".sub__launch").inner_text()
        assert heading.startswith(f"Launch {index} of 3")
        logs = group.locator(".sub__rank .sub__log[role=log]").all_inner_texts()
        assert len(logs) == 2, (index, logs)
        assert all(text.startswith(words) for text in logs), (index, logs)
    assert "once without interruption" in groups.nth(0).locator(".sub__launch").inner_text()
    assert "2 machines" in groups.nth(2).locator(".sub__launch").inner_text()
    # The deciding run's rank 1 died of a Python error: its end first, no C++ frames.
    crashed = section.locator('.sub__launch-group[data-launch="3"] .sub__rank[data-rank="1"]')
    first = crashed.locator(".sub__error-end pre").inner_text()
    assert first.splitlines()[0] == 'File "main.py", line 31, in main'
    assert "dist.all_reduce(t)" in first and "Connection closed by peer" in first
    assert "frame #" not in first and "Exception raised from" not in first
    assert "c10d_logger" not in first and "^^^" not in first  # the learner's line, not torch's
    rank0 = section.locator('.sub__launch-group[data-launch="3"] .sub__rank[data-rank="0"]')
    assert rank0.locator(".sub__error-end").count() == 0  # it ended well: no error shown first
    box = crashed.locator(".sub__error-end").bounding_box()
    log = crashed.locator(".sub__log[role=log]").bounding_box()
    assert box is not None and log is not None and box["y"] < log["y"]


def test_a_silent_launch_says_what_ranks_wait_for_until_output_arrives(page: Any) -> None:
    section = open_exercise(page, TRAIN_URL, TRAIN)
    quiet = section.locator('[data-role="quiet"]')
    section.evaluate(
        "s => { const x = s.rdvExercise; x.clearRun(); x.setRunning(true); x.startTimer();"
        " x.launchGroup(1, 'Launch 1 of 2'); x.launched = true; }"
    )
    page.wait_for_timeout(1500)  # a tick of the timer: fewer than 10 s since the launch
    assert quiet.is_hidden()
    section.evaluate("s => { s.rdvExercise.heardAt = Date.now() - 10500; }")  # 10 s of silence
    quiet.wait_for(state="visible")
    assert "init_process_group" in quiet.inner_text()
    section.evaluate("s => s.rdvExercise.appendLine(0, 'epoch 0', 2, 1)")
    assert quiet.is_hidden()
    section.evaluate("s => s.rdvExercise.showResult('done', null, false)")
    assert quiet.is_hidden()


def test_a_result_page_logs_no_console_error_and_the_legend_has_colours(page: Any) -> None:
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(f"{m.text} {m.location}"))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    section = open_exercise(page, TRAIN_URL, TRAIN)
    section.evaluate("(s, r) => s.rdvExercise.showResult('done', r, true)", failed_result())
    swatches = section.locator(".sub__legend .sub__swatch")
    assert swatches.count() >= 3
    colours = swatches.evaluate_all(
        "els => els.map(e => { const c = getComputedStyle(e);"
        " return c.backgroundColor + c.backgroundImage; })"
    )
    assert all(c not in ("rgba(0, 0, 0, 0)none", "transparentnone") for c in colours), colours
    assert len(set(colours)) == len(colours)  # each rank, overlap and unseen tell apart
    assert not section.locator(".sub__legend [style]").count()
    page.wait_for_timeout(300)  # a CSP report reaches the console after the change
    assert errors == [], "\n".join(errors)


def test_escape_then_tab_leaves_the_editor_after_a_line_button(page: Any) -> None:
    section = open_exercise(page, TRAIN_URL, TRAIN)
    section.evaluate("(s, r) => s.rdvExercise.showResult('done', r, true)", failed_result())
    before = section.evaluate("s => s.rdvExercise.editor.getValue()")
    section.locator('.sub__check[data-check="ckpt.barrier"] button.sub__line').click()
    selection = section.evaluate(
        "s => { const v = s.rdvExercise.editor.view; const m = v.state.selection.main;"
        " return [m.empty, v.state.doc.lineAt(m.head).number]; }"
    )
    assert selection == [True, 12]  # a cursor on the line, nothing selected
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    assert not page.evaluate("document.activeElement.classList.contains('cm-content')")
    assert section.evaluate("s => s.rdvExercise.editor.getValue()") == before  # nothing indented
