"""How ranks start (grader/inside/zygote.py, grader/inside/spares.py, grader/inside/rank_shim.py):
torch's agent starts each rank as the shim, which hands it to the server; the zygote forks it,
and a simulated multi-node job's node agents the same way. The sandboxed end-to-end proof is
tests/grader/test_warm_fidelity.py; here the hand-over itself, outside any sandbox, with the zygote
in a process of its own (tests/grader/zygote_host.py: a pytest worker runs threads, and a zygote is
forked only where none runs)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.harness import TRACE_DIR_ENV, stack_name
from grader.inside import spares, zygote
from grader.inside.spares import node_command, rank_command

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Host:
    """A zygote and its server in a process of their own (tests/grader/zygote_host.py)."""

    proc: subprocess.Popen[str]
    path: str

    def served(self) -> int:
        """Close the server and the zygote; how many ranks it forked."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        out = self.proc.stdout.readline().strip()
        self.proc.wait(60)
        return int(out)


def start_host(mode: str, env: dict[str, str] | None = None) -> Host:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.grader.zygote_host", mode],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    path = proc.stdout.readline().strip()
    assert path.startswith("/"), path
    return Host(proc, path)


@pytest.fixture
def host() -> Iterator[Host]:
    made = start_host("plain")
    yield made
    if made.proc.poll() is None:
        made.proc.kill()
        made.proc.wait(30)


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


@pytest.mark.slow
def test_a_forked_rank_runs_the_harness_as_it_was_handed(tmp_path: Path) -> None:
    """A zygote as the supervisor forks it (the ranks' imports ahead) runs the program as its
    rank: the argv, environment, cwd and output descriptors the shim handed over, in a session of
    its own, with torch already imported; the program's exit status is the shim's."""
    (tmp_path / "trace").mkdir()
    program = """
        import json, os, sys
        print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "rank": os.environ.get("RANK"),
                          "leader": os.getsid(0) == os.getpid(), "torch": "torch" in sys.modules,
                          "pid": os.getpid()}))
        sys.exit(3)
    """
    made = start_host("harness", env={**os.environ, TRACE_DIR_ENV: str(tmp_path / "trace")})
    try:
        os.environ[TRACE_DIR_ENV] = str(tmp_path / "trace")
        try:
            proc, log = shim(made.path, tmp_path, program, *RANK_ARGS, "--lr", "0.1", rank="1")
        finally:
            del os.environ[TRACE_DIR_ENV]
        assert proc.wait(120) == 3
        seen = json.loads(log.read_text().splitlines()[0])
        assert seen["argv"] == [str(tmp_path / "main.py"), "--lr", "0.1"]  # runpy: in full
        assert (seen["cwd"], seen["rank"], seen["leader"], seen["torch"]) == (
            str(tmp_path),
            "1",
            True,
            True,
        )
        assert seen["pid"] != proc.pid
        # The harness ran it as rank 1 (its faulthandler file is named after the rank).
        assert (tmp_path / "trace" / stack_name(1, 0)).is_file()
        assert made.served() == 1
    finally:
        if made.proc.poll() is None:
            made.proc.kill()


def test_the_shim_hands_its_rank_to_the_zygote_and_ends_with_its_code(
    host: Host, tmp_path: Path
) -> None:
    program = """
        import json, os, sys
        print(json.dumps({"argv": sys.argv, "rank": os.environ["RANK"], "cwd": os.getcwd(),
                          "pid": os.getpid()}))
        sys.exit(3)
    """
    proc, log = shim(host.path, tmp_path, program, *RANK_ARGS, "--lr", "0.1", rank="1")
    assert proc.wait(60) == 3
    seen = json.loads(log.read_text())
    assert seen["argv"] == ["main.py", "--lr", "0.1"] and seen["rank"] == "1"
    assert seen["cwd"] == str(tmp_path) and seen["pid"] != proc.pid
    assert host.served() == 1


def test_a_node_agent_is_forked_in_the_environment_its_shim_handed_over(
    host: Host, tmp_path: Path
) -> None:
    """A multi-node job's node agent goes through the shim as a rank does (its node's own
    environment, its GPU slice among it, taken over before it forks its ranks' zygote); it is
    not counted as a rank the zygote served."""
    (tmp_path / "main.py").write_text("")
    log = tmp_path / "node1.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", spares.SHIM, host.path,
             *node_command(sys.executable)[1:], "spec.json"],
            cwd=tmp_path,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": "2,3"},
            stdout=out,
            start_new_session=True,
        )  # fmt: skip
    assert proc.wait(60) == 5
    seen = json.loads(log.read_text())
    assert seen["argv"][-4:] == ["-u", "-m", "grader.inside.multinode", "spec.json"]
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "2,3" and seen["pid"] != proc.pid
    assert host.served() == 0


def test_each_rank_writes_to_its_own_descriptors(host: Host, tmp_path: Path) -> None:
    program = """
        import os, sys
        print("out of", os.environ["RANK"]); print("err of", os.environ["RANK"], file=sys.stderr)
    """
    ranks = [shim(host.path, tmp_path, program, *RANK_ARGS, rank=str(r)) for r in (0, 1)]
    assert [p.wait(60) for p, _ in ranks] == [0, 0]
    for rank, (_, log) in enumerate(ranks):
        assert sorted(log.read_text().splitlines()) == [f"err of {rank}", f"out of {rank}"]
    assert host.served() == 2


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_a_rank_killed_by_a_signal_is_reported_as_killed(
    host: Host, tmp_path: Path, sig: signal.Signals
) -> None:
    program = f"import os; os.kill(os.getpid(), {int(sig)})"
    proc, _ = shim(host.path, tmp_path, program, *RANK_ARGS)
    assert proc.wait(60) == -sig  # the shim dies of it too (SIGKILL has no handler to reset)


def test_the_agents_stop_signal_reaches_the_rank_and_the_shim_dies_of_it(
    host: Host, tmp_path: Path
) -> None:
    program = """
        import pathlib, time
        pathlib.Path("started").write_text("")
        time.sleep(600)
    """
    proc, _ = shim(host.path, tmp_path, program, *RANK_ARGS)
    _wait_for(tmp_path / "started")
    os.killpg(proc.pid, signal.SIGTERM)  # what SubprocessHandler.close does
    assert proc.wait(60) == -signal.SIGTERM


def test_a_shim_killed_by_sigkill_takes_its_rank_with_it(host: Host, tmp_path: Path) -> None:
    program = """
        import os, pathlib, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pathlib.Path("started").write_text(str(os.getpid()))
        time.sleep(600)
    """
    proc, _ = shim(host.path, tmp_path, program, *RANK_ARGS)
    _wait_for(tmp_path / "started")
    rank_pid = int((tmp_path / "started").read_text())
    os.killpg(proc.pid, signal.SIGTERM)  # ignored by the program: the agent escalates
    time.sleep(0.5)
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(60) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while _alive(rank_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(rank_pid)


def test_a_command_that_is_no_rank_or_finds_no_server_starts_cold(
    host: Host, tmp_path: Path
) -> None:
    code = "import os, sys; print('cold', os.getpid()); sys.exit(4)"
    proc, log = shim(host.path, tmp_path, "", "-c", code)
    assert proc.wait(60) == 4
    assert log.read_text().split() == ["cold", str(proc.pid)]  # the shim's own process, exec'd
    proc, log = shim(str(tmp_path / "no-server"), tmp_path, "", "-c", code)
    assert proc.wait(60) == 4 and log.read_text().split() == ["cold", str(proc.pid)]
    assert host.served() == 0


def test_a_rank_the_zygote_cannot_fork_is_the_real_command_started_cold(
    host: Host, tmp_path: Path
) -> None:
    """The zygote is gone (killed, or it could not fork): the shim starts the rank itself."""
    zygote_pids = subprocess.run(
        ["pgrep", "-P", str(host.proc.pid)], capture_output=True, text=True
    ).stdout.split()
    assert len(zygote_pids) == 1, zygote_pids
    os.kill(int(zygote_pids[0]), signal.SIGKILL)
    code = "import os, sys; print('rank', os.getpid()); sys.exit(5)"
    (tmp_path / "trace").mkdir()
    os.environ[TRACE_DIR_ENV] = str(tmp_path / "trace")
    try:
        proc, log = shim(host.path, tmp_path, code, *RANK_ARGS)
    finally:
        del os.environ[TRACE_DIR_ENV]
    assert proc.wait(120) == 5
    assert f"rank {proc.pid}" in log.read_text()  # the harness ran it in the shim's process
    assert (tmp_path / "trace" / stack_name(0, 0)).is_file()


@pytest.mark.slow
def test_the_agent_restarts_ranks_the_zygote_forked(host: Host, tmp_path: Path) -> None:
    """torch's own agent, its entrypoint the shim: a failed attempt is stopped and restarted
    (the zygote forks each attempt's ranks), each rank's output lands in its own log, and the
    agent sees each attempt's exit codes."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

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
    entry = ["-I", "-S", spares.SHIM, host.path, *RANK_ARGS]
    try:
        os.chdir(tmp_path)
        elastic_launch(config, sys.executable)(*entry)
    finally:
        os.chdir(cwd)
    assert host.served() == 4  # 2 ranks x 2 attempts
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 120)  # longer than a unix socket's path may be
    deep.mkdir()
    monkeypatch.setattr(spares.tempfile, "tempdir", str(deep))
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert spares.serve(zygote.Zygote(0, ours)) is None
    assert spares.serve(None) is None


def test_no_zygote_is_forked_beside_a_running_thread() -> None:
    """A fork copies one thread: the zygote is forked before the supervisor starts any."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert zygote.fork_zygote() is None
    finally:
        stop.set()
        thread.join()
