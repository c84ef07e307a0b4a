"""The pure parts of `python -m benchmarks api_verdicts`, and one cheap run of it (slow)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys

import pytest

from app.submissions.sse import format_event
from benchmarks import _learner, api_verdicts
from benchmarks._learner import SseEvent, SseParser


def test_defaults_serve_cold_and_warm_with_two_sandboxes() -> None:
    opts = api_verdicts.parse_args([])
    assert opts == api_verdicts.Options(
        repeat=1, queued=20, pools=(0, 2), exercises=(), concurrency=None
    )


def test_options_as_the_benchmark_runner_passes_them() -> None:
    opts = api_verdicts.parse_args(
        ["--repeat=3", "--queued=0", "--pool=both", "--size=4", "--exercises=a/b,c/d"]
    )
    assert (opts.repeat, opts.queued, opts.pools) == (3, 0, (0, 4))
    assert opts.exercises == ("a/b", "c/d")
    assert api_verdicts.parse_args(["--pool=3"]).pools == (3,)
    assert api_verdicts.parse_args(["--pool=0"]).pools == (0,)
    assert api_verdicts.parse_args(["--concurrency=2"]).concurrency == 2


@pytest.mark.parametrize(
    "argv", [["--pool=warm"], ["--pool=-1"], ["--repeat=0"], ["--queued=-2"], ["--size=0"]]
)
def test_bad_options_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        api_verdicts.parse_args(argv)
    assert refused.value.code == 2


def test_pool_labels() -> None:
    assert api_verdicts.pool_label(0) == "cold"
    assert api_verdicts.pool_label(2) == "warm K=2"


def _parse(text: str) -> list[SseEvent]:
    parser = SseParser()
    events = [parser.feed(line) for line in text.split("\n")]
    return [e for e in events if e is not None]


def test_sse_parser_reads_what_the_server_writes() -> None:
    stream = (
        "retry: 1000\n\n"
        + format_event("queued", {"position": 2, "attempt": 0})
        + ": keep-alive\n\n"
        + format_event("output", {"rank": 1, "line": "loss: 0.5", "world_size": 2}, 7)
        + format_event("done", {"status": "done", "result": {"status": "pass"}}, 9)
    )
    assert _parse(stream) == [
        SseEvent("queued", {"position": 2, "attempt": 0}, None),
        SseEvent("output", {"rank": 1, "line": "loss: 0.5", "world_size": 2}, "7"),
        SseEvent("done", {"status": "done", "result": {"status": "pass"}}, "9"),
    ]


def test_sse_parser_joins_data_lines_and_keeps_text_that_is_not_json() -> None:
    assert _parse("data: one\r\ndata:two\r\n\r\n") == [SseEvent("message", "one\ntwo", None)]
    assert _parse('event: check\ndata: {"a":\ndata: 1}\n\n') == [SseEvent("check", {"a": 1})]
    # An event with no data is dropped, and its name does not leak into the next one.
    assert _parse("event: lost\n\ndata: 3\n\n") == [SseEvent("message", 3, None)]


def test_ratio_and_figure_formatting() -> None:
    assert api_verdicts.ratio(2.0, 4.0) == "0.50x"
    assert api_verdicts.ratio(None, 4.0) == "-"
    assert api_verdicts.ratio(3.0, 0.0) == "-"
    assert api_verdicts.figure(8.3, 4.1, 1.234) == "  8.30 s  2.02x (load 1.23)"
    assert api_verdicts.figure(None, 4.1, 0.5).endswith("(load 0.50)")
    assert api_verdicts.median([None, 3.0, 1.0, 2.0]) == 2.0
    assert api_verdicts.median([None]) is None


def test_process_tree_reading() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '30'])"]
    )
    try:
        for _ in range(100):
            under = _learner.descendants(os.getpid())
            grandchildren = _learner.descendants(child.pid)
            if child.pid in under and grandchildren:
                break
            subprocess.run(["sleep", "0.05"])
        assert child.pid in under
        assert set(grandchildren) <= set(under)
        ticks, pids = _learner.tree_cpu_ticks(child.pid)
        assert ticks >= 0 and pids == frozenset(grandchildren)
        memory = _learner.tree_memory(child.pid)
        assert memory.processes == len(grandchildren) == 1
        assert memory.names == {"sleep": 1}
        assert memory.rss_mib > 0
        assert _learner.wait_idle([child.pid], quiet_s=0.3, timeout_s=60) >= 0
    finally:
        for pid in _learner.descendants(child.pid):  # the sleep this test started
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        child.kill()
        child.wait()


@pytest.mark.slow
@pytest.mark.sandbox
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap")
def test_one_exercise_through_a_warm_server(capsys: pytest.CaptureFixture[str]) -> None:
    status = api_verdicts.main(["--pool=1", "--exercises=ddp-fundamentals/train", "--queued=1"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "round 1 ddp-fundamentals/train: bare" in printed
    assert "verdicts on the stream: 1/1 {'pass': 1}" in printed
    assert "lost: 0" in printed
