"""Spare ranks (grader/inside/spares.py, grader/harness/spare.py, grader/inside/rank_shim.py):
interpreters started ahead, each handed one rank through the shim torch's agent starts. The
sandboxed end-to-end proof is tests/grader/test_warm_fidelity.py; here the hand-over itself,
outside any sandbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.harness import TRACE_DIR_ENV, stack_name
from grader.inside import spares
from grader.inside.spares import Spares, SpareServer, hand_over, rank_command

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
        assert hand_over(spare, argv, env, (0, out.fileno(), err.fileno()))
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


# A spare of the protocol that runs its rank's file in plain Python (no torch, no harness): what
# the shim and the server do is under test here, not the rank.
PLAIN = [sys.executable, "-c", "import runpy, sys\n"
         "from grader.inside.spares import ready_and_receive\n"
         "argv = ready_and_receive()\n"
         "if argv:\n"
         "    sys.argv = argv[4:]\n"
         "    runpy.run_path(argv[4], run_name='__main__')"]  # fmt: skip


@pytest.fixture
def server(pool: list[Spares]) -> Iterator[SpareServer]:
    s = started(pool, PLAIN, 2)
    made = SpareServer(s)
    yield made
    made.close()


def shim(
    server_path: str, job: Path, program: str, *args: str, rank: str = "0"
) -> tuple[subprocess.Popen[bytes], Path]:
    """Start a rank the way torch's agent does (its own session, stdout/stderr to a file), with
    the shim as its command; (the shim's process, its output file)."""
    (job / "main.py").write_text(textwrap.dedent(program))
    log = job / f"rank{rank}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", spares.SHIM, server_path, *args],
            cwd=job,
            env={**os.environ, "RANK": rank},
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    return proc, log


RANK_ARGS = tuple(rank_command(sys.executable)[1:])  # -u -m grader.harness main.py


def test_the_shim_hands_its_rank_to_a_spare_and_ends_with_its_code(
    server: SpareServer, tmp_path: Path
) -> None:
    program = """
        import json, os, sys
        print(json.dumps({"argv": sys.argv, "rank": os.environ["RANK"], "cwd": os.getcwd(),
                          "pid": os.getpid(), "spare": "RDV_SPARE_FD" in os.environ}))
        sys.exit(3)
    """
    proc, log = shim(server.path, tmp_path, program, *RANK_ARGS, "--lr", "0.1", rank="1")
    assert proc.wait(60) == 3
    seen = json.loads(log.read_text())
    assert seen["argv"] == ["main.py", "--lr", "0.1"] and seen["rank"] == "1"
    assert seen["cwd"] == str(tmp_path) and seen["pid"] != proc.pid and not seen["spare"]
    assert server.spares.served == 1


def test_each_rank_writes_to_its_own_descriptors(server: SpareServer, tmp_path: Path) -> None:
    program = """
        import os, sys
        print("out of", os.environ["RANK"]); print("err of", os.environ["RANK"], file=sys.stderr)
    """
    ranks = [shim(server.path, tmp_path, program, *RANK_ARGS, rank=str(r)) for r in (0, 1)]
    assert [p.wait(60) for p, _ in ranks] == [0, 0]
    for rank, (_, log) in enumerate(ranks):
        assert sorted(log.read_text().splitlines()) == [f"err of {rank}", f"out of {rank}"]
    assert server.spares.served == 2


def test_the_agents_stop_signal_reaches_the_spare_and_the_shim_dies_of_it(
    server: SpareServer, tmp_path: Path
) -> None:
    program = """
        import pathlib, time
        pathlib.Path("started").write_text("")
        time.sleep(600)
    """
    proc, _ = shim(server.path, tmp_path, program, *RANK_ARGS)
    _wait_for(tmp_path / "started")
    os.killpg(proc.pid, signal.SIGTERM)  # what SubprocessHandler.close does
    assert proc.wait(60) == -signal.SIGTERM


def test_a_shim_killed_by_sigkill_takes_its_spare_with_it(
    server: SpareServer, tmp_path: Path
) -> None:
    program = """
        import os, pathlib, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pathlib.Path("started").write_text(str(os.getpid()))
        time.sleep(600)
    """
    proc, _ = shim(server.path, tmp_path, program, *RANK_ARGS)
    _wait_for(tmp_path / "started")
    spare_pid = int((tmp_path / "started").read_text())
    os.killpg(proc.pid, signal.SIGTERM)  # ignored by the program: the agent escalates
    time.sleep(0.5)
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(60) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while _alive(spare_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(spare_pid)


def test_a_command_that_is_no_rank_or_finds_no_server_starts_cold(
    server: SpareServer, tmp_path: Path
) -> None:
    code = "import os, sys; print('cold', os.getpid()); sys.exit(4)"
    proc, log = shim(server.path, tmp_path, "", "-c", code)
    assert proc.wait(60) == 4
    assert log.read_text().split() == ["cold", str(proc.pid)]  # the shim's own process, exec'd
    proc, log = shim(str(tmp_path / "no-server"), tmp_path, "", "-c", code)
    assert proc.wait(60) == 4 and log.read_text().split() == ["cold", str(proc.pid)]
    assert server.spares.served == 0


@pytest.mark.slow
def test_a_rank_with_no_spare_left_is_the_real_command_started_cold(
    pool: list[Spares], tmp_path: Path
) -> None:
    empty = SpareServer(started(pool, PLAIN, 0))
    try:
        program = "import os, sys; print('rank', os.getpid()); sys.exit(5)"
        (tmp_path / "trace").mkdir()
        os.environ[TRACE_DIR_ENV] = str(tmp_path / "trace")
        try:
            proc, log = shim(empty.path, tmp_path, program, *RANK_ARGS)
        finally:
            del os.environ[TRACE_DIR_ENV]
        assert proc.wait(120) == 5
        assert f"rank {proc.pid}" in log.read_text()  # the harness ran it in the shim's process
        assert (tmp_path / "trace" / stack_name(0, 0)).is_file()
    finally:
        empty.close()


@pytest.mark.slow
def test_the_agent_restarts_ranks_served_by_spares(pool: list[Spares], tmp_path: Path) -> None:
    """torch's own agent, its entrypoint the shim: a failed attempt is stopped and restarted
    (each attempt's ranks spares: replacements start as the first ones are taken), each rank's
    output lands in its own log, and the agent sees each attempt's exit codes."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    s = started(pool, PLAIN, 2)
    s.for_job(nproc=2, max_restarts=1)
    srv = SpareServer(s)
    (tmp_path / "main.py").write_text(
        textwrap.dedent(
            """
            import os, sys
            attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
            print("rank", os.environ["RANK"], "attempt", attempt, "pid", os.getpid())
            sys.exit(7 if attempt == 0 and os.environ["RANK"] == "1" else 0)
            """
        )
    )
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=2, run_id="shim-test",
        rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=1,
        monitor_interval=0.1, start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(tmp_path / "logs"), redirects=Std.ALL),
    )  # fmt: skip
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        elastic_launch(config, sys.executable)(*srv.entry_args(list(RANK_ARGS)))
    finally:
        os.chdir(cwd)
        srv.close()
    assert s.served == 4  # 2 ranks x 2 attempts
    logs = sorted((tmp_path / "logs").glob("*/attempt_*/*/stdout.log"))
    seen = {(p.parent.parent.name, p.parent.name): p.read_text().split() for p in logs}
    assert sorted(seen) == [("attempt_0", "0"), ("attempt_0", "1"), ("attempt_1", "0"),
                            ("attempt_1", "1")]  # fmt: skip
    for (attempt, rank), words in seen.items():
        assert words[:4] == ["rank", rank, "attempt", attempt[-1]]


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_no_socket_for_the_server_means_cold_ranks(
    pool: list[Spares], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 120)  # longer than a unix socket's path may be
    deep.mkdir()
    monkeypatch.setattr(spares.tempfile, "tempdir", str(deep))
    s = started(pool, WAITING, 1)
    assert spares.serve(s) is None
    assert s.closed and s.idle == []  # its spares went with it
