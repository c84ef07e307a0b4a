"""Hostile learner programs, graded for real through `grader.api.grade` in the bwrap sandbox.

Each one must be contained and still yield a Result with status "fail" (the learner's fault, never
"error") and a message the learner can read.
"""

from __future__ import annotations

import json
import shutil
import socket
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from grader.contract import Job, Result
from tests.grader.sandbox_helpers import processes_with, token

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]
EXERCISE = "ddp-fundamentals/train"
REPO = Path(__file__).resolve().parents[2]


def grade_hostile(code: str, **limits: Any) -> Result:
    from grader.api import grade
    from grader.exercises import load_spec

    spec = load_spec(EXERCISE)
    # Generous: the ranks must get to the hostile code even on a busy machine.
    spec.limits = spec.limits.model_copy(update={"wall_seconds": 60, **limits})
    job = Job(
        exercise=EXERCISE,
        code=textwrap.dedent(code),
        spec=spec,
        submission_id=f"hostile-{uuid.uuid4().hex[:8]}",
    )
    return grade(job, sandbox="bwrap")


def assert_learner_fail(result: Result) -> None:
    assert result.status == "fail", f"{result.status}: {result.summary} {result.error}"
    assert result.error is None
    assert result.launch is not None and result.launch.sandbox == "bwrap"
    failed = [c for c in result.checks if c.status == "fail"]
    assert failed, result
    assert all(c.message.strip() for c in failed)


def rank_output(result: Result) -> str:
    return "\n".join(r.output for r in result.ranks)


def test_network_is_unreachable_from_a_submission() -> None:
    with socket.create_connection(("127.0.0.1", 5432), timeout=5):
        pass  # the host's PostgreSQL is there ...
    result = grade_hostile(
        """
        import socket
        for host, port in [("127.0.0.1", 5432), ("1.1.1.1", 443)]:
            try:
                socket.create_connection((host, port), timeout=3).close()
                print(f"NET {host}:{port} connected", flush=True)
            except OSError as exc:
                print(f"NET {host}:{port} {type(exc).__name__}", flush=True)
        """
    )
    assert_learner_fail(result)
    out = rank_output(result)
    assert "NET 127.0.0.1:5432" in out and "NET 1.1.1.1:443" in out  # ... it really ran
    assert "connected" not in out


def test_host_files_are_out_of_reach_of_a_submission() -> None:
    result = grade_hostile(
        f"""
        import os
        try:
            open("/etc/shadow").read()
            print("FILES shadow read", flush=True)
        except OSError as exc:
            print("FILES shadow", type(exc).__name__, flush=True)
        print("FILES root", sorted(os.listdir("/root")), flush=True)
        print("FILES git", os.path.exists("{REPO}/.git"), flush=True)
        """
    )
    assert_learner_fail(result)
    out = rank_output(result)
    assert "FILES shadow read" not in out and "FILES shadow" in out
    assert "FILES root ['.pyenv']" in out
    assert "FILES git False" in out


def test_environment_snooping_finds_no_host_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    canary = token()
    monkeypatch.setenv("RDV_HOST_CANARY", canary)
    result = grade_hostile(
        """
        import os
        print("ENV", dict(os.environ), flush=True)
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    print("ENV", pid, open(f"/proc/{pid}/environ", "rb").read(), flush=True)
                except OSError as exc:
                    print("ENV", pid, type(exc).__name__, flush=True)
        """
    )
    assert_learner_fail(result)
    assert "ENV" in rank_output(result)
    assert canary not in result.model_dump_json()


def test_fork_bomb_is_contained() -> None:
    result = grade_hostile(
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        wall_seconds=15,
    )
    assert_learner_fail(result)


def test_memory_bomb_is_contained() -> None:
    result = grade_hostile(
        """
        chunks = []
        while True:
            chunks.append(b"x" * (64 << 20))
        """,
        memory_mb=1536,
    )
    assert_learner_fail(result)
    completed = next(c for c in result.checks if c.id == "run.completed")
    assert completed.status == "fail"


def test_endless_loop_is_stopped_and_located() -> None:
    result = grade_hostile(
        """
        import time
        print("LOOPING", flush=True)
        while True:
            time.sleep(0.01)
        """,
        wall_seconds=30,
    )
    assert_learner_fail(result)
    completed = next(c for c in result.checks if c.id == "run.completed")
    assert completed.status == "fail"
    assert "30 s" in completed.message, completed
    # Where every rank got as far as the loop before the wall clock, the message says where.
    if result.ranks and all("LOOPING" in r.output for r in result.ranks):
        assert "line 5" in completed.message or completed.line == 5, completed


def test_output_flood_is_capped_per_rank() -> None:
    cap = 4096
    result = grade_hostile(
        """
        import sys
        for i in range(300_000):
            sys.stdout.write(f"flood {i} " + "y" * 200 + "\\n")
        """,
        output_bytes_per_rank=cap,
    )
    assert_learner_fail(result)
    assert result.ranks
    for rank in result.ranks:
        assert rank.truncated
        # The head up to the cap, a note, and the last lines (a few KiB) of ~60 MB written.
        assert len(rank.output.encode()) < cap + 4096
    assert len(result.model_dump_json()) < 200_000


def test_left_behind_daemon_is_gone_after_grading() -> None:
    marker = token()
    result = grade_hostile(
        f"""
        import os, sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c",
                         "import time\\nwhile True: time.sleep(1)", "{marker}"])
            os._exit(0)
        print("daemon started", flush=True)
        """
    )
    assert_learner_fail(result)
    assert processes_with(marker) == []


def test_killing_the_supervisor_is_the_learners_fault() -> None:
    result = grade_hostile(
        """
        import os, signal
        os.kill(os.getppid(), signal.SIGKILL)
        os.kill(1, signal.SIGKILL)
        os.kill(-1, signal.SIGKILL)
        """
    )
    assert_learner_fail(result)


def test_filling_the_disk_is_the_learners_fault() -> None:
    result = grade_hostile(
        """
        import os, tempfile
        for where in (".", tempfile.gettempdir()):
            i = 0
            while True:
                try:
                    with open(os.path.join(where, f"fill{os.getpid()}-{i}"), "wb") as f:
                        f.write(b"z" * (4 << 20))
                except OSError as exc:
                    print("DISK full", where, exc.errno, flush=True)
                    break
                i += 1
        """,
        disk_mb=64,
    )
    assert_learner_fail(result)


def test_result_of_a_hostile_run_is_plain_json() -> None:
    result = grade_hostile("print('\\x00\\x1b[2J\\udcff not utf-8', flush=True)\n")
    assert_learner_fail(result)
    json.loads(result.model_dump_json())


def test_signals_to_the_supervisor_are_the_learners_fault() -> None:
    result = grade_hostile(
        """
        import os, signal, time
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP, signal.SIGQUIT):
            try:
                os.kill(1, sig)
            except OSError:
                pass
            time.sleep(0.2)
        """
    )
    assert_learner_fail(result)


def test_the_supervisors_memory_is_out_of_reach() -> None:
    result = grade_hostile(
        """
        for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/maps"):
            try:
                open(path, "rb").read(1)
                print("PROC", path, "readable", flush=True)
            except OSError as exc:
                print("PROC", path, type(exc).__name__, flush=True)
        """
    )
    assert_learner_fail(result)
    out = rank_output(result)
    assert "PROC /proc/1/maps" in out
    assert "readable" not in out
