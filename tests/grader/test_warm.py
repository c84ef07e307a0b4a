"""The warm pool (grader.warm): pre-started single-use bwrap sandboxes for every launch."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import warm
from grader.contract import Job, Limits, Result
from grader.sandbox.base import SandboxRequest
from grader.sandbox.bwrap_warm import WarmBwrap
from tests.grader.sandbox_helpers import host_uid

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "lessons" / "02-ddp-fundamentals" / "exercises" / "train" / "solution.py"
EXERCISE = "ddp-fundamentals/train"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap")


def request(tmp_path: Path, **limits: float) -> SandboxRequest:
    return SandboxRequest(
        workdir=tmp_path, argv=["x"], env={"A": "1"}, limits=Limits(**limits), gpus=[]
    )


def test_launches_that_differ_only_in_what_a_job_sets_late_share_a_sandbox(
    tmp_path: Path,
) -> None:
    a = request(tmp_path, wall_seconds=30, output_bytes_per_rank=4096)
    b = request(tmp_path, wall_seconds=90)
    b.env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    assert warm.WarmKey.for_request(a) == warm.WarmKey.for_request(b)
    # What a sandbox is started with (its tmpfs, rlimits, cgroup) does split the pool.
    assert warm.WarmKey.for_request(a) != warm.WarmKey.for_request(request(tmp_path, disk_mb=64))
    assert warm.WarmKey.for_request(a) != warm.WarmKey.for_request(
        request(tmp_path, memory_mb=1536)
    )
    assert warm.WarmKey.for_request(a).limits_for_start().disk_mb == Limits().disk_mb


def test_pool_size_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(warm.POOL_ENV, "0")
    assert warm.pool_size() == 0
    monkeypatch.setenv(warm.POOL_ENV, "3")
    assert warm.pool_size() == 3
    monkeypatch.delenv(warm.POOL_ENV)
    monkeypatch.setattr(warm, "_available_mib", lambda: 24 * 1024)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert warm.pool_size() == 2  # the next launch of a grading ready while one runs
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert warm.default_size() == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert warm.default_size() == warm.MAX_PLAN
    # Never more than a quarter of the free memory: none where that is under one sandbox.
    monkeypatch.setattr(warm, "_available_mib", lambda: 4 * warm.IDLE_MIB)
    assert warm.default_size() == 1
    monkeypatch.setattr(warm, "_available_mib", lambda: 1000)
    assert warm.default_size() == 0


# -- real sandboxes -------------------------------------------------------------------------


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(warm.POOL_ENV, "1")
    warm.close_pool()
    yield
    warm.close_pool()


def grade_solution(code: str | None = None) -> Result:
    from grader.api import grade
    from grader.exercises import load_spec

    spec = load_spec(EXERCISE)
    spec.launch.world_sizes = spec.launch.world_sizes[:1]
    spec.limits = spec.limits.model_copy(update={"wall_seconds": 120})
    job = Job(exercise=EXERCISE, code=code or SOLUTION.read_text(), spec=spec, submission_id="w")
    return grade(job, sandbox="bwrap")


@needs_bwrap
@pytest.mark.sandbox
def test_a_warm_sandbox_holds_nothing_of_a_learner_before_its_job(tmp_path: Path) -> None:
    sandbox = WarmBwrap(Limits(), [], {"PATH": "/usr/bin:/bin"}, 120, shutil.which("bwrap") or "")
    sandbox.start()
    try:
        assert sandbox.wait_ready(120), sandbox.sink.before
        assert sandbox.stage is not None and sandbox.proc is not None
        inside = sorted(p.name for p in sandbox.stage.path.iterdir())
        assert not any(name.startswith(".rdv-config") or name.endswith(".py") for name in inside)
        children = Path(f"/proc/{sandbox.proc.pid}/task/{sandbox.proc.pid}/children")
        # The supervisor (bwrap's child) waits as the job's unprivileged uid.
        pids = children.read_text().split()
        assert pids
        if os.getuid() == 0:
            assert host_uid(int(pids[0])) != 0
    finally:
        sandbox.destroy()
    assert sandbox.proc is not None and sandbox.proc.poll() is not None
    assert sandbox.placeholder is None and sandbox.user is None


@needs_bwrap
@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.usefixtures("pool")
def test_a_launch_is_served_warm_and_the_sandbox_is_used_once() -> None:
    result = grade_solution()
    assert result.status == "pass", (result.summary, result.error)
    pool = warm.get_pool()
    assert pool is not None
    assert pool.stats.served == 1 and pool.stats.cold == 0, pool.stats
    # A fresh one is started for the next launch (the used one was destroyed).
    deadline = time.monotonic() + 120
    while pool.counts()["ready"] < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pool.counts()["ready"] == 1


@needs_bwrap
@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.usefixtures("pool")
def test_a_dead_warm_sandbox_falls_back_to_a_cold_start() -> None:
    pool = warm.get_pool()
    assert pool is not None
    # Kill the supervisor of every warm sandbox as soon as it is ready: nothing warm can serve.
    real_run = WarmBwrap.run

    def run_after_its_death(self: WarmBwrap, *args: object, **kwargs: object) -> object:
        assert self.proc is not None
        os.killpg(self.proc.pid, 9)
        self.proc.wait()
        return real_run(self, *args, **kwargs)  # type: ignore[arg-type]

    WarmBwrap.run = run_after_its_death  # type: ignore[method-assign]
    try:
        result = grade_solution()
    finally:
        WarmBwrap.run = real_run  # type: ignore[method-assign]
    assert result.status == "pass", (result.summary, result.error)
    assert result.launch is not None and result.launch.sandbox == "bwrap"
    assert pool.stats.cold >= 1 and pool.stats.served == 0, pool.stats


@needs_bwrap
@pytest.mark.sandbox
@pytest.mark.slow
def test_with_the_pool_off_launches_start_cold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(warm.POOL_ENV, "0")
    warm.close_pool()
    result = grade_solution()
    assert result.status == "pass", (result.summary, result.error)
    assert warm.get_pool() is None


def test_run_warm_without_a_pool_says_cold(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(warm.POOL_ENV, "0")
    warm.close_pool()
    req = SandboxRequest(workdir=tmp_path, argv=[sys.executable], env={}, limits=Limits())
    assert warm.run_warm(req, ".rdv-config-x.json", None) is None


def test_a_report_left_by_a_program_whose_supervisor_was_killed_is_ignored(tmp_path: Path) -> None:
    """Forked ranks hold the report's nonce in their memory: a file of that name is only the
    supervisor's if the supervisor lived to write it."""
    import json

    from grader.exercises import load_spec
    from grader.launch.host import _view
    from grader.launch.plan import Launch
    from grader.sandbox.base import SandboxOutcome

    spec = load_spec(EXERCISE)
    job = Job(exercise=EXERCISE, code="print(1)", spec=spec, submission_id="forged")
    report = tmp_path / ".rdv-report-n.json"
    forged = {"ranks": [{"rank": 0, "exit_code": 0, "events": []}], "checkpoints": {}}
    report.write_text(json.dumps(forged))

    def outcome(code: int) -> SandboxOutcome:
        return SandboxOutcome(code, False, True, 1.0, "", "bwrap")

    killed = _view(job, Launch(1, "cpu", []), outcome(137), report, [])
    assert killed.ranks == [] and killed.oom_killed and killed.platform_error is None
    lived = _view(job, Launch(1, "cpu", []), outcome(0), report, [])
    assert [r.rank for r in lived.ranks] == [0]


# -- planning: which sandbox the pool starts next -------------------------------------------


class Idle:
    """An idle pool entry's side the planning reads."""

    def __init__(self) -> None:
        self.destroyed = False

    def ready(self) -> bool:
        return True

    def alive(self) -> bool:
        return True

    def expires_in(self) -> float:
        return 1e9

    def destroy(self) -> None:
        self.destroyed = True


def key(tmp_path: Path, ranks: int) -> warm.WarmKey:
    return warm.WarmKey.for_request(request(tmp_path), ranks=ranks)


def planner(size: int, *keys: warm.WarmKey) -> warm.WarmPool:
    pool = warm.WarmPool(size, refill=False)
    pool.want(list(keys))
    return pool


def test_the_pool_readies_a_gradings_launches_in_order(tmp_path: Path) -> None:
    two, three, one = key(tmp_path, 2), key(tmp_path, 3), key(tmp_path, 1)
    pool = planner(2, two, three, one)
    assert pool._desired() == [two, three]
    assert pool._next_key()[0] == two
    pool.idle.append((two, Idle()))  # type: ignore[arg-type]
    assert pool._next_key()[0] == three
    # A plan shorter than the pool cycles: both sandboxes for the same launch.
    assert planner(2, one)._desired() == [one, one]


def test_a_waiting_launch_comes_first_and_takes_room_from_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two, one = key(tmp_path, 2), key(tmp_path, 1)
    pool = planner(1, two)
    held = Idle()
    pool.idle.append((two, held))  # type: ignore[arg-type]
    assert pool._next_key() == (None, [])  # full, and holding what the plan wants
    pool.requested = one
    started, dropped = pool._next_key()
    assert started == one and dropped == [held] and pool.idle == []


def test_a_small_machine_refills_between_gradings_not_during_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two = key(tmp_path, 2)
    one = key(tmp_path, 1)
    pool = planner(2, two, one)
    pool.idle.append((two, Idle()))  # type: ignore[arg-type]
    pool.busy, pool.position = 1, 1  # a grading made its first launch: it still needs `one`
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert pool._next_key()[0] == one
    pool.idle.append((one, Idle()))  # type: ignore[arg-type]
    pool.idle.pop(0)
    pool.position = 2  # its last launch runs: the next grading's sandbox waits until it ends
    assert pool._next_key()[0] is None
    pool.requested = two  # unless a launch waits for one
    assert pool._next_key()[0] == two
    pool.requested = None
    monkeypatch.setattr(os, "cpu_count", lambda: 16)  # cores to spare: refill at once
    assert pool._next_key()[0] == two


def test_sandboxes_a_new_plan_does_not_want_make_room(tmp_path: Path) -> None:
    two, three = key(tmp_path, 2), key(tmp_path, 3)
    pool = planner(1, two)
    old = Idle()
    pool.idle.append((two, old))  # type: ignore[arg-type]
    pool.want([three])
    started, dropped = pool._next_key()
    assert started == three and dropped == [old]


def test_a_warm_sandbox_starts_with_the_spares_its_key_names(tmp_path: Path) -> None:
    from grader.sandbox.docker_warm import WarmDocker
    from grader.sandbox.warm_output import supervisor_wait_argv

    bwrap = warm.make_sandbox(warm.WarmKey.for_request(request(tmp_path), ranks=2), 60, "bwrap")
    assert isinstance(bwrap, WarmBwrap) and (bwrap.spares, bwrap.nodes) == (2, 1)
    docker_key = warm.WarmKey.for_request(request(tmp_path), ("docker", "img", "1:1"), 1, 2)
    docker = warm.make_sandbox(docker_key, 60, "bwrap")
    assert isinstance(docker, WarmDocker) and (docker.spares, docker.nodes) == (1, 2)
    assert supervisor_wait_argv(60, 1, 2)[-3:] == ["--wait=60", "--spares=1", "--nodes=2"]
    assert "--nodes=1" not in supervisor_wait_argv(60, 2, 1)


@needs_bwrap
@pytest.mark.sandbox
@pytest.mark.usefixtures("pool")
def test_an_expected_exercise_becomes_the_pools_plan() -> None:
    """What a learner has open (grader.api.prewarm_exercise) replaces the plan the last grading
    of another exercise left: its launches, in order, are what the pool readies."""
    from grader.api import prewarm_exercise
    from grader.exercises import load_spec
    from grader.launch.plan import plan_launches

    prewarm_exercise(load_spec(EXERCISE))
    pool = warm.get_pool()
    assert pool is not None
    first = list(pool.plan)
    env_launch = load_spec("torchrun-launch/env-launch")
    prewarm_exercise(env_launch)
    assert len(pool.plan) == len(plan_launches(env_launch)) == 4
    assert pool.plan != first and pool.plan[-1].nodes == 2
