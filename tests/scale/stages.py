"""The stages of `make scale-test`, in order. Each returns a one-line note for the report and
raises on any wrong verdict."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import time
from pathlib import Path

from grader.contract import Result
from grader.sandbox.docker import ROLE_WARM
from grader.sandbox.reaper import LABEL_ROLE
from tests.grader import hostile_programs as programs
from tests.grader.sandbox_helpers import processes_with, token
from tests.scale.learner import Learner
from tests.scale.stack import REPO, Stack

LESSON_2 = REPO / "lessons" / "02-ddp-fundamentals" / "exercises" / "train"
CASES = REPO / "tests" / "grader" / "cases"
SOLUTION = (LESSON_2 / "solution.py").read_text()
BUILD_LOCAL = REPO / ".build-local"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def case(name: str) -> tuple[str, list[str]]:
    """A golden case's program and the checks it must fail."""
    expected = json.loads((CASES / name / "expected.json").read_text())
    return (CASES / name / "main.py").read_text(), sorted(expected["failing"])


def failing(result: Result) -> list[str]:
    return sorted(c.id for c in result.checks if c.status == "fail")


def expect_pass(result: Result) -> None:
    messages = [c.message for c in result.checks if c.status == "fail"]
    assert result.status == "pass", (
        f"{result.status}: {result.summary} {failing(result)} {messages} {result.error} "
        f"{result.timings_ms}"
    )
    assert result.launch is not None and result.launch.sandbox == "docker", result.launch


def expect_learner_fail(result: Result, checks: list[str] | None = None) -> None:
    assert result.status == "fail", f"{result.status}: {result.summary} {result.error}"
    assert result.error is None
    assert result.launch is not None and result.launch.sandbox == "docker", result.launch
    assert failing(result), result.summary
    assert all(c.message.strip() for c in result.checks if c.status == "fail")
    if checks is not None:
        assert failing(result) == checks, (failing(result), checks)


def output(result: Result) -> str:
    return "\n".join(rank.output for rank in result.ranks)


def build(stack: Stack) -> str:
    """The web and grader images from the real Dockerfile; pip in the image finds the CPU torch
    wheel where pip finds it here and trusts the host's CA bundle."""
    BUILD_LOCAL.mkdir(exist_ok=True)
    if not list(BUILD_LOCAL.glob("torch-*.whl")):
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps"]
        subprocess.run(
            [*pip, "--only-binary=:all:", "torch==2.13.0", "-d", str(BUILD_LOCAL)], check=True
        )
    if HOST_CA_BUNDLE.exists():
        (BUILD_LOCAL / "ca-certificates.crt").write_bytes(HOST_CA_BUNDLE.read_bytes())
    stack.compose("build", "web", "grader-cpu")
    sizes = stack.docker(
        "image", "ls", "--format", "{{.Repository}}:{{.Tag}} {{.Size}}", "rendezvous-*"
    )
    no_torch = stack.docker(
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "python",
        "rendezvous-web:0.1.0",
        "-c",
        "import importlib.util as u; print(u.find_spec('torch') is None)",
    ).strip()
    assert no_torch == "True", "the web image has torch"
    return "images " + ", ".join(sizes.split("\n")).strip(", ") + "; web image without torch"


def up(stack: Stack) -> str:
    # A run stopped midway leaves its stack and volumes (its database with another run's
    # password among them): start from nothing.
    stack.down()
    refused = _refuses_without_password(stack)
    stack.prepare_jobs_dir()
    stack.compose("up", "-d")
    stack.wait_healthy()
    stack.wait_service_healthy("grader-cpu", 1)
    migrate = stack.containers("migrate")
    code = stack.inspect(migrate[0])["State"]["ExitCode"] if migrate else None
    assert code == 0, f"the migrate service ended with {code}"
    worker = stack.inspect(stack.containers("grader-cpu")[0])
    assert worker["Config"]["User"] == "rendezvous", worker["Config"]["User"]
    return (
        f"web healthy on {stack.base_url}, migrate exited 0, 1 worker (user rendezvous); {refused}"
    )


def _refuses_without_password(stack: Stack) -> str:
    env = {k: v for k, v in stack.env.items() if k != "POSTGRES_PASSWORD"}
    done = subprocess.run(
        ["docker-compose", "-f", "docker-compose.yml", "config", "-q"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "POSTGRES_PASSWORD" in done.stderr, done.stderr
    return "compose refuses to start without POSTGRES_PASSWORD"


def grade_correct_and_wrong(stack: Stack) -> str:
    learner = Learner(stack.base_url, "ada")
    wrong_code, wrong_checks = case("bug_no_set_epoch")
    t0 = time.monotonic()
    right, wrong = learner.submit(SOLUTION), learner.submit(wrong_code)
    sandbox = _first_sandbox(stack, timeout_s=300)
    right_result = learner.result(right)
    expect_pass(right_result)
    right_s = time.monotonic() - t0
    wrong_result = learner.result(wrong)
    expect_learner_fail(wrong_result, wrong_checks)
    wrong_s = time.monotonic() - t0
    served = stack.warm_launches()
    assert served, "no launch was served by the worker's warm pool"
    return (
        f"correct: pass ({right_s:.0f} s from submit), bug_no_set_epoch: fail {wrong_checks} "
        f"({wrong_s:.0f} s); {len(served)} launches from the warm pool; sandbox container: "
        f"{sandbox}"
    )


def _first_sandbox(stack: Stack, timeout_s: float) -> str:
    """Wait for a sandbox container and check how it is locked down."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for cid in stack.sandboxes():
            try:
                info = stack.inspect(cid)
            except RuntimeError:
                continue  # gone between the two calls
            if info["Config"]["Labels"].get(LABEL_ROLE) == "work":
                continue  # the holder of its work volume, not the sandbox itself
            host = info["HostConfig"]
            assert host["NetworkMode"] == "none", host["NetworkMode"]
            assert host["ReadonlyRootfs"] is True
            assert host["CapDrop"] == ["ALL"], host["CapDrop"]
            assert "no-new-privileges:true" in host["SecurityOpt"], host["SecurityOpt"]
            assert host["PidsLimit"] and host["Memory"] == host["MemorySwap"] > 0
            assert info["Config"]["User"] == "10001:10001", info["Config"]["User"]
            assert info["Config"]["Labels"].get("rdv.worker"), info["Config"]["Labels"]
            return (
                f"network none, read-only root, cap-drop ALL, no-new-privileges, "
                f"pids {host['PidsLimit']}, memory {host['Memory'] >> 20} MiB, user 10001"
            )
        time.sleep(0.2)
    raise TimeoutError("no sandbox container appeared")


def containment(stack: Stack) -> str:
    """The containment suite's hostile programs, graded in Docker sandboxes via the API. Those
    that only end at the spec's wall clock (endless loop) or allocate gigabytes on a shared
    machine (memory bomb) stay in the bwrap suite; the fork bomb runs to the wall clock."""
    marker = token()
    attacks: list[tuple[str, str]] = [
        ("network", programs.NETWORK),
        ("host-files", programs.host_files(str(REPO))),
        ("environment", programs.ENVIRONMENT),
        ("output-flood", programs.OUTPUT_FLOOD),
        ("daemon", programs.daemon(marker)),
        ("kill-supervisor", programs.KILL_SUPERVISOR),
        ("supervisor-memory", programs.SUPERVISOR_MEMORY),
        ("fork-bomb", programs.FORK_BOMB),
        ("fill-disk", programs.FILL_DISK),
    ]
    learner = Learner(stack.base_url, "mallory")
    served_before = set(stack.warm_launches())
    results: dict[str, Result] = {}
    for i in range(0, len(attacks), 2):  # two in flight per learner
        batch = [(name, learner.submit(code)) for name, code in attacks[i : i + 2]]
        for name, submission_id in batch:
            results[name] = learner.result(submission_id)
            expect_learner_fail(results[name])
    out = {name: output(result) for name, result in results.items()}
    assert "NET 127.0.0.1:5432" in out["network"] and "NET 1.1.1.1:443" in out["network"]
    assert "connected" not in out["network"]
    assert "FILES shadow" in out["host-files"] and "FILES shadow read" not in out["host-files"]
    assert "FILES git False" in out["host-files"]
    assert "ENV" in out["environment"]
    dumped = results["environment"].model_dump_json()
    assert stack.db_password not in dumped and stack.env["RDV_SECRET_KEY"] not in dumped
    for rank in results["output-flood"].ranks:
        assert rank.truncated and len(rank.output.encode()) < 64 * 1024 + 4096
    assert processes_with(marker) == [], "the daemon outlived its sandbox"
    assert "PROC /proc/1/maps" in out["supervisor-memory"]
    assert "readable" not in out["supervisor-memory"]
    # The work dir is a size-capped tmpfs volume: the disk runs out there (ENOSPC), not on the host.
    assert f"DISK full . {errno.ENOSPC}" in out["fill-disk"], out["fill-disk"][-500:]
    served = stack.warm_launches()
    assert len(served) == len(set(served)), f"a warm container served twice: {served}"
    warm = [s for s in served if s not in served_before]
    assert len(warm) >= len(attacks), f"only {len(warm)} launches from the warm pool"
    idle = _only_idle_warm_left(stack, served)
    return (
        f"{len(results)} attacks, all a learner's fail, none escaped: {', '.join(results)}; "
        f"{len(warm)} launches, each in a warm container of its own, removed after it; "
        f"{idle} idle warm container(s) left, their work volumes empty"
    )


def _only_idle_warm_left(stack: Stack, served: list[str]) -> int:
    """What is left are the pool's idle containers (never assigned: none served a launch) and
    the holders of their work volumes, which hold nothing."""
    idle = 0
    for cid in stack.sandboxes():
        try:
            info = stack.inspect(cid)
        except RuntimeError:
            continue  # the pool replaced it meanwhile
        role = info["Config"]["Labels"].get(LABEL_ROLE)
        assert role in (ROLE_WARM, "work"), f"a sandbox container left behind: {cid} ({role})"
        assert cid[:12] not in served, f"{cid} served a launch and is still there"
        if role == "work" and info["State"]["Running"]:
            inside = stack.files_in(cid, "/work")
            assert inside == ["work"], f"an idle warm sandbox's work volume holds {inside}"
        idle += role == ROLE_WARM
    return idle


def kill_worker_mid_job(stack: Stack) -> str:
    learner = Learner(stack.base_url, "grace")
    before = learner.exercise_attempts()
    submission_id = learner.submit(SOLUTION)
    learner.wait_for(submission_id, ("running",), timeout_s=300)
    deadline = time.monotonic() + 120
    while not stack.sandboxes():
        assert time.monotonic() < deadline, "the job never started a sandbox"
        time.sleep(0.2)
    orphan = stack.sandboxes()[0]
    worker = stack.containers("grader-cpu")[0]
    restarts = stack.inspect(worker)["RestartCount"]
    killed_at = time.monotonic()
    stack.sigkill(worker)
    back_s = None
    while back_s is None and time.monotonic() - killed_at < 120:
        state = stack.inspect(worker)
        if state["RestartCount"] > restarts and state["State"]["Running"]:
            back_s = time.monotonic() - killed_at
        time.sleep(0.2)
    assert back_s is not None, "the killed worker was not restarted"
    result = learner.result(submission_id, timeout_s=600)
    done_s = time.monotonic() - killed_at
    expect_pass(result)
    body = learner.submission(submission_id)
    assert body["attempts"] == 2, body["attempts"]
    charged = learner.exercise_attempts() - before
    assert charged == 1, f"the learner was charged {charged} attempts"
    assert orphan not in stack.sandboxes(), "the killed worker's sandbox was not reaped"
    return (
        f"worker SIGKILLed mid-job; restarted in {back_s:.1f} s; the submission passed on "
        f"attempt 2, {done_s:.0f} s after the kill; learner charged 1 attempt; orphan sandbox "
        "reaped"
    )


def scale_out(stack: Stack) -> str:
    stack.compose("up", "-d", "--no-recreate", "--scale", "grader-cpu=2", "grader-cpu")
    stack.wait_service_healthy("grader-cpu", 2)
    wrong_a, checks_a = case("bug_no_set_epoch")
    wrong_b, checks_b = case("bug_missing_destroy")
    plan = [("pass", SOLUTION, None), ("fail", wrong_a, checks_a)]
    plan += [("pass", SOLUTION, None), ("fail", wrong_b, checks_b)]
    learners = [Learner(stack.base_url, "hopper"), Learner(stack.base_url, "lovelace")]
    t0 = time.monotonic()
    submitted = [
        (learners[i // 2].submit(code), learners[i // 2], verdict, checks)
        for i, (verdict, code, checks) in enumerate(plan)
    ]
    for submission_id, learner, verdict, checks in submitted:
        result = learner.result(submission_id, timeout_s=900)
        if verdict == "pass":
            expect_pass(result)
        else:
            expect_learner_fail(result, checks)
    elapsed = time.monotonic() - t0
    workers = stack.containers("grader-cpu")
    used = [w for w in workers if any(s in stack.logs_of(w) for s, *_ in submitted)]
    assert len(used) == 2, f"only {len(used)} of {len(workers)} workers took jobs"
    reruns = stack.warm_reruns()
    for line in reruns:
        print(f"[scale] warm launch run again cold: {line}", flush=True)
    return (
        f"4 submissions (2 pass, 2 fail as expected) in {elapsed:.0f} s on 2 workers; "
        f"{len(reruns)} warm launch(es) of the whole run ran again cold"
    )
