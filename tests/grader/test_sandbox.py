"""The sandbox interface, the "none" backend, and the options the bwrap/docker backends build."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from grader.contract import Limits
from grader.sandbox import SandboxRequest, SandboxUnavailable, get_sandbox
from grader.sandbox.base import HARD_KILL_GRACE_S
from grader.sandbox.bwrap import BwrapPlan, BwrapSandbox, bwrap_argv, runtime_paths
from grader.sandbox.docker import DockerSandbox, container_kwargs
from grader.sandbox.nosandbox import NoSandbox
from grader.sandbox.process import OutputCap
from grader.settings import reset
from tests.grader.sandbox_helpers import processes_with, run_python, token


def test_get_sandbox_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RDV_SANDBOX", raising=False)
    reset()
    assert isinstance(get_sandbox(), BwrapSandbox)
    assert isinstance(get_sandbox("none"), NoSandbox)
    assert isinstance(get_sandbox("docker"), DockerSandbox)
    monkeypatch.setenv("RDV_SANDBOX", "none")
    reset()  # grader.settings reads the environment once: again now
    assert get_sandbox().name == "none"
    with pytest.raises(ValueError, match="unknown sandbox"):
        get_sandbox("chroot")


def test_hard_timeout_defaults_to_wall_clock_plus_grace(tmp_path: Path) -> None:
    req = SandboxRequest(workdir=tmp_path, argv=["x"], env={}, limits=Limits(wall_seconds=30))
    assert req.hard_timeout_s == 30 + HARD_KILL_GRACE_S
    req.kill_after_s = 5
    assert req.hard_timeout_s == 5


def test_output_cap_keeps_the_head_streams_lines_and_notes_the_cut() -> None:
    lines: list[str] = []
    cap = OutputCap(20, lines.append)
    cap.feed(b"one\ntw")
    cap.feed(b"o\nthree\nfour is too long\n")
    cap.flush()
    assert lines == ["one", "two", "three", "four i"]
    assert cap.truncated
    assert cap.text().startswith("one\ntwo\nthree\nfour i\n[output truncated")


def test_output_cap_survives_a_broken_listener() -> None:
    def explode(line: str) -> None:
        raise RuntimeError("listener bug")

    cap = OutputCap(100, explode)
    cap.feed(b"a\nb\n")
    assert cap.text() == "a\nb\n"


def test_none_backend_runs_with_exactly_the_given_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RDV_HOST_CANARY", "visible?")
    out = run_python(
        tmp_path,
        "import os; print(sorted(os.environ)); open('made.txt', 'w').write('x')",
        backend="none",
        env={"ONLY": "1"},
    )
    assert out.exit_code == 0 and out.sandbox == "none"
    assert "RDV_HOST_CANARY" not in out.output and "'ONLY'" in out.output
    assert (tmp_path / "made.txt").exists()


def test_none_backend_reports_exit_codes_and_signals(tmp_path: Path) -> None:
    assert run_python(tmp_path, "raise SystemExit(3)", backend="none").exit_code == 3
    killed = run_python(tmp_path, "import os; os.kill(os.getpid(), 9)", backend="none")
    assert killed.exit_code == 128 + 9 and not killed.timed_out


def test_none_backend_kills_at_the_hard_wall_clock(tmp_path: Path) -> None:
    marker = token()
    out = run_python(tmp_path, f"# {marker}\nwhile True: pass\n", backend="none", kill_after_s=1)
    assert out.timed_out and out.exit_code == 128 + 9
    assert processes_with(marker) == []


def test_none_backend_applies_rlimits(tmp_path: Path) -> None:
    out = run_python(
        tmp_path,
        "import resource; print(resource.getrlimit(resource.RLIMIT_CORE), "
        "resource.getrlimit(resource.RLIMIT_AS))",
        backend="none",
        address_space_mb=2048,
    )
    assert out.output.strip() == f"(0, 0) ({2048 << 20}, {2048 << 20})"


def _plan(tmp_path: Path, **kw: object) -> BwrapPlan:
    base = {
        "workdir_host": str(tmp_path),
        "env": {"A": "1"},
        "argv": ["/usr/bin/python3", "main.py"],
        "ro_paths": ["/opt/py", "/work/main/.venv"],
    }
    return BwrapPlan(**{**base, **kw})  # type: ignore[arg-type]


def test_bwrap_argv_unshares_everything_and_isolates(tmp_path: Path) -> None:
    argv = bwrap_argv(_plan(tmp_path, data_fds={"/etc/hosts": 7}))
    for flag in (
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ):
        assert flag in argv
    assert argv[argv.index("--hostname") + 1] == "rdv-sandbox"
    assert argv[argv.index("--setenv") : argv.index("--setenv") + 3] == ["--setenv", "A", "1"]
    joined = " ".join(argv)
    assert f"--bind {tmp_path} /work" in joined
    assert "--ro-bind-data 7 /etc/hosts" in joined
    # Read-only binds come after /work so the venv is visible inside it, never the reverse.
    assert joined.index(f"--bind {tmp_path} /work") < joined.index("--ro-bind /work/main/.venv")
    assert "--ro-bind / " not in joined and "--bind / " not in joined
    assert argv[-3:] == ["--", "/usr/bin/python3", "main.py"]
    assert "--dev-bind" not in argv


def test_bwrap_argv_passes_only_the_requested_gpus(tmp_path: Path) -> None:
    joined = " ".join(bwrap_argv(_plan(tmp_path, gpus=[1, 3])))
    assert "--dev-bind /dev/nvidia1 /dev/nvidia1" in joined
    assert "--dev-bind /dev/nvidia3 /dev/nvidia3" in joined
    assert "/dev/nvidia0" not in joined
    assert "--dev-bind-try /dev/nvidiactl /dev/nvidiactl" in joined


def test_runtime_paths_cover_python_venv_and_grader() -> None:
    paths = runtime_paths()
    import grader

    for needed in (sys.base_prefix, sys.prefix, os.path.dirname(grader.__file__)):
        real = os.path.realpath(needed)
        assert real.startswith("/usr/") or any(real == p or real.startswith(p + "/") for p in paths)
    assert "/" not in paths and "/root" not in paths


def test_docker_container_options(tmp_path: Path) -> None:
    limits = Limits(memory_mb=2048, pids=100, disk_mb=64)
    req = SandboxRequest(
        workdir=tmp_path, argv=["python", "main.py"], env={"X": "y"}, limits=limits
    )
    kw = container_kwargs(req, image="img:1", user="1234:1234")
    # The request's argv replaces the image's entrypoint (the grader image's is the worker).
    assert [*kw["entrypoint"], *kw["command"]] == ["python", "main.py"]
    assert kw["extra_hosts"] == {kw["hostname"]: "127.0.0.1"}  # torchrun resolves it
    assert kw["network_mode"] == "none"
    assert kw["read_only"] is True
    assert kw["mem_limit"] == kw["memswap_limit"] == "2048m"
    assert kw["pids_limit"] == 100
    assert kw["user"] == "1234:1234"
    assert kw["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in kw["security_opt"]
    # The supervisor is the container's pid 1 (no tini): the learner cannot SIGKILL it.
    assert kw["init"] is False
    assert kw["volumes"] == {str(tmp_path.resolve()): {"bind": "/work", "mode": "rw"}}
    assert kw["working_dir"] == "/work"
    assert kw["environment"]["X"] == "y"
    assert "size=64m" in kw["tmpfs"]["/tmp"] and "uid=1234" in kw["tmpfs"]["/home/sandbox"]
    limits_by_name = {u["Name"]: u["Hard"] for u in kw["ulimits"]}
    assert limits_by_name["core"] == 0 and limits_by_name["fsize"] == 64 << 20
    assert "device_requests" not in kw
    gpu = container_kwargs(
        SandboxRequest(workdir=tmp_path, argv=["x"], env={}, limits=limits, gpus=[0, 2]),
        image="img:1",
    )
    (request,) = gpu["device_requests"]
    assert request["DeviceIDs"] == ["0", "2"] and request["Capabilities"] == [["gpu"]]


def test_docker_backend_without_engine_is_a_platform_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    req = SandboxRequest(workdir=tmp_path, argv=["x"], env={}, limits=Limits())
    with pytest.raises(SandboxUnavailable, match="Docker engine"):
        DockerSandbox().run(req)
