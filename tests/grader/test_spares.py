"""Spare ranks (grader.spares, grader.harness.spare): interpreters started ahead, each handed one
rank by torch's agent. The sandboxed end-to-end proof is tests/grader/test_warm_fidelity.py; here
the hand-over itself, outside any sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import spares
from grader.harness import TRACE_DIR_ENV, stack_name
from grader.spares import Spare, Spares, hand_over, rank_command

# A spare of the protocol only: says it is ready, then blocks until it is killed.
WAITING = [sys.executable, "-c", "import os, socket, time\n"
           "s = socket.socket(fileno=int(os.environ['RDV_SPARE_FD'])); s.sendall(b'R')\n"
           "time.sleep(600)"]  # fmt: skip


@pytest.fixture
def pool() -> Iterator[list[Spares]]:
    made: list[Spares] = []
    yield made
    for s in made:
        s.close()


def started(pool: list[Spares], command: list[str], count: int) -> Spares:
    s = Spares(command)
    pool.append(s)
    s.start(count)
    return s


@pytest.mark.slow
def test_a_spare_becomes_the_rank_it_is_handed(tmp_path: Path, pool: list[Spares]) -> None:
    """A real spare (torch imported ahead) runs the program as its rank: the argv, environment,
    cwd and output descriptors it was handed, and the program's exit status is the process's."""
    job = tmp_path / "job"
    (job / "trace").mkdir(parents=True)
    (job / "main.py").write_text(
        textwrap.dedent(
            """
            import json, os, sys
            print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "rank": os.environ.get("RANK"),
                              "spare": os.environ.get("RDV_SPARE_FD"),
                              "torch": "torch" in sys.modules}))
            sys.exit(3)
            """
        )
    )
    s = started(pool, rank_command(sys.executable), 1)
    spare = s.take()
    assert spare is not None
    env = {**os.environ, "RANK": "1", TRACE_DIR_ENV: str(job / "trace")}
    argv = [*rank_command(sys.executable), "--lr", "0.1"]
    out = (job / "stdout.log").open("w")
    err = (job / "stderr.log").open("w")
    cwd = os.getcwd()
    try:
        os.chdir(job)
        assert hand_over(spare, argv, env, (out.fileno(), err.fileno()))
    finally:
        os.chdir(cwd)
    assert spare.proc.wait(120) == 3
    out.close()
    err.close()
    # The harness sends the rank's stderr to its stdout (one stream per rank, in order).
    seen = json.loads((job / "stdout.log").read_text().splitlines()[0])
    assert seen == {
        "argv": [str(job / "main.py"), "--lr", "0.1"],  # runpy names the file in full
        "cwd": str(job),
        "rank": "1",
        "spare": None,
        "torch": True,
    }
    # The harness ran it as rank 1 (its faulthandler file is named after the rank).
    assert (job / "trace" / stack_name(1, 0)).is_file()


def test_a_spare_that_dies_before_it_is_ready_serves_no_rank(pool: list[Spares]) -> None:
    s = started(pool, [sys.executable, "-c", "raise SystemExit(1)"], 2)
    assert s.take() is None
    assert s.idle == []


def test_spares_the_job_does_not_need_go_when_it_is_known(pool: list[Spares]) -> None:
    s = started(pool, WAITING, 3)
    everyone = list(s.idle)
    s.for_job(nproc=1, max_restarts=0)
    assert len(s.idle) == 1
    gone = [sp for sp in everyone if sp not in s.idle]
    assert all(sp.proc.poll() is not None for sp in gone)
    taken = s.take()
    assert taken is not None and taken.proc.poll() is None
    assert s.take() is None  # no restarts: nothing replaces it
    taken.discard()


def test_a_job_that_may_restart_gets_its_spares_replaced(pool: list[Spares]) -> None:
    s = started(pool, WAITING, 2)
    s.for_job(nproc=2, max_restarts=1)
    first = [s.take(), s.take()]
    assert all(sp is not None for sp in first)
    # The restart's ranks: replacements started as the first ones were taken.
    again = [s.take(), s.take()]
    assert all(sp is not None and sp.ready for sp in again)
    assert {id(sp) for sp in first}.isdisjoint({id(sp) for sp in again})
    for sp in first + again:
        assert sp is not None
        sp.discard()


def test_a_replacement_started_after_close_is_not_kept(pool: list[Spares]) -> None:
    s = started(pool, WAITING, 1)
    s.for_job(nproc=1, max_restarts=1)
    first = s.take()  # its replacement starts in the background
    assert first is not None
    s.close()
    assert s.take() is None  # closed: nothing is waited for
    deadline = time.monotonic() + 30
    while s.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert s.pending == 0 and s.idle == []
    first.discard()


def test_the_agent_is_handed_spares_for_rank_commands_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pool: list[Spares]
) -> None:
    from torch.distributed.elastic.multiprocessing.subprocess_handler import (
        subprocess_handler as handler_module,
    )

    monkeypatch.setattr(  # restored after the test: install() patches the class
        handler_module.SubprocessHandler, "_popen", handler_module.SubprocessHandler._popen
    )
    s = started(pool, WAITING, 1)
    handed: list[tuple[list[str], dict[str, str]]] = []

    def fake_hand_over(spare: Spare, argv: list[str], env: dict[str, str], fds: object) -> bool:
        handed.append((argv, env))
        return True

    monkeypatch.setattr(spares, "hand_over", fake_hand_over)
    spares.install(s)
    log = str(tmp_path / "out.log")

    def start(*args: str) -> subprocess.Popen[bytes]:
        handler = handler_module.SubprocessHandler(
            entrypoint=args[0], args=args[1:], env={"RANK": "0", TRACE_DIR_ENV: str(tmp_path)},
            stdout=log, stderr=log,
            local_rank_id=0, numa_options=None,
        )  # fmt: skip
        return handler.proc

    other = start(sys.executable, "-c", "pass")  # not a rank: torch starts it
    assert other.wait(60) == 0 and handed == []
    rank = start(*rank_command(sys.executable))
    assert len(handed) == 1 and handed[0][1]["RANK"] == "0"
    assert rank.poll() is None and s.served == 1  # the spare's own process
    os.killpg(rank.pid, 9)
    rank.wait()
    # No spare left: the next rank is started by torch.
    late = start(sys.executable, "-u", "-m", "grader.harness", "-c")
    assert late.wait(60) != 0 and len(handed) == 1
