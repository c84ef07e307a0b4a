"""The bwrap sandbox contains hostile programs: real bubblewrap, real processes, real limits."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import sys
from pathlib import Path

import pytest

from grader.contract import Limits
from grader.sandbox.base import SandboxRequest
from grader.sandbox.bwrap import BwrapSandbox
from tests.grader.sandbox_helpers import host_uid, processes_with, run_python, token

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]


def last_json(output: str) -> dict:
    lines = [line for line in output.splitlines() if line.startswith("{")]
    assert lines, output
    return json.loads(lines[-1])


def test_plain_program_runs_in_work_dir_and_its_files_come_back(tmp_path: Path) -> None:
    (tmp_path / "input.txt").write_text("from the grader")
    out = run_python(
        tmp_path,
        """
        import json, os
        open("result.txt", "w").write(open("input.txt").read().upper())
        print(json.dumps({"cwd": os.getcwd(), "uid": os.getuid()}))
        """,
    )
    assert out.exit_code == 0, out.output
    assert out.sandbox == "bwrap"
    assert not out.timed_out and not out.oom_killed
    assert last_json(out.output) == {"cwd": "/work", "uid": last_json(out.output)["uid"]}
    assert last_json(out.output)["uid"] != 0
    assert (tmp_path / "result.txt").read_text() == "FROM THE GRADER"


def test_a_signal_the_grader_ignores_is_at_default_in_the_sandbox(tmp_path: Path) -> None:
    """A grader thread in `system()` ignores SIGQUIT for the whole process while its child runs;
    a sandbox started in that moment still starts with it at default (ignored dispositions
    survive exec: the exec wrapper resets them)."""
    before = signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    try:
        out = run_python(
            tmp_path,
            """
            import json, signal
            status = dict(l.split(":\\t", 1) for l in open("/proc/self/status") if ":\\t" in l)
            print(json.dumps({"handler": int(signal.getsignal(signal.SIGQUIT)),
                              "ignored": int(status["SigIgn"], 16)}))
            """,
        )
    finally:
        signal.signal(signal.SIGQUIT, before)
    assert out.exit_code == 0, out.output
    seen = last_json(out.output)
    assert seen["handler"] == int(signal.SIG_DFL)
    assert not seen["ignored"] & (1 << (signal.SIGQUIT - 1)), hex(seen["ignored"])


def test_runs_as_unprivileged_host_uid(tmp_path: Path) -> None:
    marker = token()
    seen: dict[str, int] = {}

    def on_output(line: str) -> None:
        if line == "ready" and not seen:
            for pid in processes_with(marker):
                with contextlib.suppress(OSError, LookupError):
                    seen[str(pid)] = host_uid(pid)

    out = run_python(
        tmp_path,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "{marker}"])
        for _ in range(20):  # the grader's output reader may lag on a busy machine
            print("ready", flush=True)
            time.sleep(0.25)
        child.kill()
        """,
        on_output=on_output,
    )
    assert out.exit_code == 0, out.output
    assert seen, "the sandboxed process was not found on the host"
    assert all(uid != 0 for uid in seen.values()), seen
    assert all(uid != os.getuid() or os.getuid() != 0 for uid in seen.values())


def test_no_network_beyond_its_own_loopback(tmp_path: Path) -> None:
    # The host's PostgreSQL is reachable from outside the sandbox ...
    with socket.create_connection(("127.0.0.1", 5432), timeout=5):
        pass
    out = run_python(
        tmp_path,
        """
        import json, socket
        result = {"interfaces": [name for _, name in socket.if_nameindex()]}
        try:
            socket.create_connection(("127.0.0.1", 5432), timeout=3).close()
            result["postgres"] = "connected"
        except OSError as exc:
            result["postgres"] = type(exc).__name__
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=3).close()
            result["internet"] = "connected"
        except OSError as exc:
            result["internet"] = type(exc).__name__
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname(), timeout=3)
        conn, _ = server.accept()
        client.sendall(b"ping")
        result["loopback"] = conn.recv(4).decode()
        result["hostname"] = socket.gethostbyname(socket.gethostname())
        print(json.dumps(result))
        """,
    )
    res = last_json(out.output)
    # ... but not from inside: the sandbox has its own network namespace with only `lo`.
    assert res["interfaces"] == ["lo"]
    assert res["postgres"] != "connected"
    assert res["internet"] != "connected"
    assert res["loopback"] == "ping"
    assert res["hostname"] == "127.0.0.1"


def test_host_files_are_invisible_and_nothing_outside_work_and_tmpfs_is_writable(
    tmp_path: Path,
) -> None:
    repo = Path(__file__).resolve().parents[2]
    assert (repo / ".git").exists() and Path("/etc/shadow").exists()
    host_root = sorted(os.listdir("/root"))
    out = run_python(
        tmp_path,
        f"""
        import json, os
        res = {{}}
        try:
            open("/etc/shadow").read()
            res["shadow"] = "read"
        except OSError as exc:
            res["shadow"] = type(exc).__name__
        res["root"] = sorted(os.listdir("/root"))
        res["git"] = os.path.exists("{repo}/.git")
        res["app"] = os.path.exists("{repo}/app")
        res["repo"] = sorted(os.listdir("{repo}"))
        res["etc"] = sorted(os.listdir("/etc"))
        writable = {{}}
        for d in ["/", "/usr", "/etc", "/root", "{repo}", "{repo}/.venv", "{repo}/grader",
                  "/usr/lib", "/dev", "/proc/sys", "/work", "/tmp", "/home/sandbox", "/dev/shm",
                  "{repo}/.venv/bin", "/root/.pyenv/versions"]:
            try:
                with open(os.path.join(d, "rdv-probe"), "w") as f:
                    f.write("x")
                writable[d] = True
            except OSError:
                writable[d] = False
        res["writable"] = writable
        with open("/dev/null", "w") as f:
            f.write("devices still work")
        print(json.dumps(res))
        """,
    )
    res = last_json(out.output)
    assert res["shadow"] in ("FileNotFoundError", "PermissionError")
    assert res["root"] == [".pyenv"] != host_root
    assert res["git"] is False and res["app"] is False
    assert set(res["repo"]) <= {".venv", "grader"}
    assert "shadow" not in res["etc"] and "passwd" in res["etc"]
    writable = {d for d, ok in res["writable"].items() if ok}
    # The repo path exists inside /work only as the mount points of the read-only binds.
    assert writable - {f"{repo}"} == {"/work", "/tmp", "/home/sandbox", "/dev/shm"}


def test_environment_shows_no_host_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = token()
    monkeypatch.setenv("RDV_HOST_CANARY", canary)
    out = run_python(
        tmp_path,
        """
        import json, os
        blobs = {"os.environ": repr(dict(os.environ))}
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    blobs[pid] = open(f"/proc/{pid}/environ", "rb").read().decode()
                    blobs[pid + "/cmdline"] = open(f"/proc/{pid}/cmdline", "rb").read().decode()
                except OSError as exc:
                    blobs[pid] = type(exc).__name__
        print(json.dumps({"blobs": blobs, "env": dict(os.environ)}))
        """,
        env={"GIVEN": "yes"},
    )
    res = last_json(out.output)
    assert canary not in out.output
    allowed = {"GIVEN", "HOME", "PATH", "TMPDIR", "PWD", "LC_CTYPE"}
    assert res["env"]["GIVEN"] == "yes"
    assert set(res["env"]) <= allowed
    # pid 1 is the command itself (bwrap --as-pid-1): its start-up environment is the request's.
    assert "1" in res["blobs"], "pid 1 of the sandbox should be readable"
    pid1_env = {kv.split("=", 1)[0] for kv in res["blobs"]["1"].split("\0") if kv}
    assert "GIVEN" in pid1_env and pid1_env <= allowed


def test_fork_bomb_is_contained_by_the_pids_limit(tmp_path: Path) -> None:
    out = run_python(
        tmp_path,
        """
        import os, time, json
        made = 0
        try:
            for _ in range(5000):
                if os.fork() == 0:
                    time.sleep(120)
                    os._exit(0)
                made += 1
            print(json.dumps({"made": made, "error": None}))
        except OSError as exc:
            print(json.dumps({"made": made, "error": exc.errno}), flush=True)
        """,
        pids=64,
    )
    res = last_json(out.output)
    assert res["error"] is not None, res
    assert res["made"] < 64
    assert not out.timed_out


def test_endless_fork_bomb_is_killed_at_the_wall_clock(tmp_path: Path) -> None:
    marker = token()
    out = run_python(
        tmp_path,
        f"""
        import os
        # {marker}
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        pids=64,
        kill_after_s=3,
    )
    assert out.timed_out
    assert processes_with(marker) == []


def test_memory_bomb_is_oom_killed(tmp_path: Path) -> None:
    out = run_python(
        tmp_path,
        """
        chunks = []
        while True:
            chunks.append(b"x" * (32 << 20))
        """,
        memory_mb=512,
        address_space_mb=8192,
    )
    assert out.oom_killed, out
    assert out.exit_code != 0
    assert not out.timed_out


def test_endless_loop_is_timed_out_and_killed(tmp_path: Path) -> None:
    marker = token()
    out = run_python(tmp_path, f"# {marker}\nwhile True:\n    pass\n", kill_after_s=2)
    assert out.timed_out
    assert out.exit_code == 128 + 9
    assert processes_with(marker) == []


def test_output_flood_is_capped(tmp_path: Path) -> None:
    lines: list[str] = []
    out = run_python(
        tmp_path,
        """
        import sys
        for i in range(200_000):
            sys.stdout.write(f"flood line {i} " + "y" * 100 + "\\n")
        print("done", file=sys.stderr)
        """,
        on_output=lines.append,
        output_bytes_per_rank=4096,
    )
    cap = 4096 * 8
    assert out.exit_code == 0
    assert out.output_truncated
    assert "[output truncated" in out.output
    assert len(out.output.encode()) < cap + 200
    assert sum(len(line) for line in lines) <= cap
    assert lines[0].startswith("flood line 0 ")


def test_left_behind_daemon_is_gone_after_run(tmp_path: Path) -> None:
    marker = token()
    out = run_python(
        tmp_path,
        f"""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c",
                         "import time\\nwhile True: time.sleep(1)", "{marker}"])
            os._exit(0)
        time.sleep(0.5)
        print("parent exits", flush=True)
        """,
    )
    assert out.exit_code == 0
    assert "parent exits" in out.output
    assert processes_with(marker) == []


def test_disk_limit_caps_the_work_dir(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the sized work dir needs root")
    out = run_python(
        tmp_path,
        """
        import json
        written = 0
        try:
            for i in range(100):
                with open(f"blob{i}", "wb") as f:
                    f.write(b"z" * (4 << 20))
                written += 4
        except OSError as exc:
            print(json.dumps({"written_mb": written, "errno": exc.errno}))
        """,
        disk_mb=32,
    )
    res = last_json(out.output)
    assert res["written_mb"] < 32
    assert res["errno"] in (27, 28)  # EFBIG or ENOSPC


def test_symlinks_made_inside_never_reach_the_host(tmp_path: Path) -> None:
    out = run_python(
        tmp_path,
        """
        import os
        os.symlink("/etc/shadow", "trace.jsonl")
        os.mkfifo("pipe")
        open("real.txt", "w").write("ok")
        """,
    )
    assert out.exit_code == 0, out.output
    assert not (tmp_path / "trace.jsonl").is_symlink()
    assert not (tmp_path / "pipe").exists()
    assert (tmp_path / "real.txt").read_text() == "ok"


def test_missing_bwrap_is_a_platform_fault(tmp_path: Path) -> None:
    from grader.sandbox import SandboxUnavailable

    req = SandboxRequest(workdir=tmp_path, argv=["/bin/true"], env={}, limits=Limits())
    with pytest.raises(SandboxUnavailable):
        BwrapSandbox(bwrap=str(tmp_path / "no-bwrap")).run(req)


@pytest.mark.slow
def test_torchrun_two_rank_gloo_all_reduce_works_inside(tmp_path: Path) -> None:
    (tmp_path / "allreduce.py").write_text(
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "t = torch.tensor([float(dist.get_rank() + 1)])\n"
        "dist.all_reduce(t)\n"
        "print(f'rank {dist.get_rank()} of {dist.get_world_size()} sum {t.item()}', flush=True)\n"
        "dist.destroy_process_group()\n"
    )
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    argv += ["--nproc-per-node", "2", "allreduce.py"]
    req = SandboxRequest(
        workdir=tmp_path,
        argv=argv,
        env={"OMP_NUM_THREADS": "1"},
        limits=Limits(wall_seconds=180),
    )
    out = BwrapSandbox().run(req)
    assert out.exit_code == 0, out.output
    assert "rank 0 of 2 sum 3.0" in out.output
    assert "rank 1 of 2 sum 3.0" in out.output


def test_processes_inside_cannot_kill_the_command(tmp_path: Path) -> None:
    out = run_python(
        tmp_path,
        """
        import os, signal, subprocess, sys
        code = "import os, signal; os.kill(1, signal.SIGKILL); os.kill(-1, signal.SIGKILL)"
        subprocess.run([sys.executable, "-c", code])
        print("pid", os.getpid(), "survived", flush=True)
        """,
    )
    assert out.exit_code == 0, out.output
    assert "pid 1 survived" in out.output


def test_a_sandbox_that_cannot_start_is_a_platform_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.sandbox import SandboxUnavailable, bwrap

    monkeypatch.setattr(bwrap, "runtime_paths", lambda: [str(tmp_path / "missing" / "python")])
    req = SandboxRequest(workdir=tmp_path, argv=["/bin/true"], env={}, limits=Limits())
    with pytest.raises(SandboxUnavailable, match="failed to start"):
        BwrapSandbox().run(req)


def test_exit_status_of_the_command_is_reported(tmp_path: Path) -> None:
    assert run_python(tmp_path, "raise SystemExit(7)").exit_code == 7
    crash = run_python(tmp_path, "import ctypes; ctypes.string_at(0)")  # a real segfault
    assert crash.exit_code == 128 + 11


def test_a_hostile_work_dir_shape_still_comes_back(tmp_path: Path) -> None:
    out = run_python(
        tmp_path,
        """
        import os
        for i in range(2000):
            open(f"many{i}", "w").close()
        open("kept.txt", "w").write("ok")
        for _ in range(300):  # 60 KB of path: far beyond PATH_MAX and any sane recursion
            os.mkdir("d" * 200)
            os.chdir("d" * 200)
        """,
    )
    assert out.exit_code == 0, out.output
    assert (tmp_path / "kept.txt").read_text() == "ok"
    assert (tmp_path / "many1999").exists()


def test_work_dirs_left_by_a_dead_grader_are_swept(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the sized work dirs need root")
    from grader.sandbox import users, workdir
    from grader.settings import settings

    slots = range(settings().sandbox_slots)
    user = next(u for s in slots if (u := users.try_acquire_slot(s)) is not None)
    assert user.slot is not None
    stale = users.state_dir() / "work" / f"slot-{user.slot}"
    stale.mkdir(parents=True, exist_ok=True)
    workdir._mount_tmpfs(stale, "size=1m")
    user.release()  # as if its grader had died mid-job
    try:
        out = run_python(tmp_path / "job", "print('ok')")
        assert out.exit_code == 0
        if workdir._is_mount(stale):  # fine only if another job took the slot meanwhile
            holder = users.try_acquire_slot(user.slot)
            if holder is not None:
                holder.release()
                pytest.fail("the stale work dir was not swept")
    finally:
        if workdir._is_mount(stale) and (again := users.try_acquire_slot(user.slot)):
            workdir.StagedWorkdir._clear(stale)
            again.release()


def test_without_a_cgroup_the_wall_clock_still_kills_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.sandbox import bwrap

    monkeypatch.setattr(bwrap.JobCgroup, "create", classmethod(lambda cls, **kw: None))
    marker = token()
    out = run_python(
        tmp_path,
        f"""
        import os, sys
        if os.fork() == 0:
            os.setsid()
            os.execv(sys.executable, [sys.executable, "-c", "while True: pass", "{marker}"])
        while True:
            pass
        """,
        kill_after_s=2,
    )
    assert out.timed_out
    assert any("no writable cgroup" in w for w in out.warnings)
    assert processes_with(marker) == []


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the seccomp filter is x86_64 only")
def test_seccomp_denies_reaching_into_other_processes(tmp_path: Path) -> None:
    out = run_python(
        tmp_path,
        """
        import ctypes, json
        libc = ctypes.CDLL(None, use_errno=True)
        res = {}
        for name, nr in [("ptrace", 101), ("process_vm_readv", 310), ("bpf", 321),
                         ("userfaultfd", 323), ("x32 getpid", 0x40000000 + 39)]:
            ctypes.set_errno(0)
            res[name] = [libc.syscall(nr, 0, 0, 0, 0, 0, 0), ctypes.get_errno()]
        ctypes.set_errno(0)
        res["getpid"] = [libc.syscall(39), ctypes.get_errno()]
        print(json.dumps(res))
        """,
    )
    res = last_json(out.output)
    eperm = 1
    for name in ("ptrace", "process_vm_readv", "bpf", "userfaultfd", "x32 getpid"):
        assert res[name] == [-1, eperm], name
    assert res["getpid"] == [1, 0]  # pid 1 of its namespace; ordinary calls pass


def test_no_new_user_namespaces_or_privileges_inside(tmp_path: Path) -> None:
    out = run_python(
        tmp_path,
        """
        import ctypes, json
        libc = ctypes.CDLL(None, use_errno=True)
        res = {"unshare_user": libc.unshare(0x10000000)}  # CLONE_NEWUSER
        res["caps"] = [line.split()[1] for line in open("/proc/self/status")
                       if line.startswith(("CapEff", "CapPrm", "CapAmb"))]
        res["no_new_privs"] = [line.split()[1] for line in open("/proc/self/status")
                               if line.startswith("NoNewPrivs")]
        print(json.dumps(res))
        """,
    )
    res = last_json(out.output)
    assert res["unshare_user"] == -1
    assert set(res["caps"]) == {"0000000000000000"}
    assert res["no_new_privs"] == ["1"]
