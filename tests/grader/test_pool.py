"""The warm pool (grader.sandbox.pool): prepared single-use sandboxes for every launch, owned
by the grading process."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.contract import Job, Limits, Result
from grader.sandbox import pool_plan
from grader.sandbox.base import Preparation, SandboxRequest
from grader.sandbox.bwrap import BwrapBox, BwrapSandbox
from grader.sandbox.pool import Pool, open_pool
from grader.sandbox.pool_plan import WarmKey
from grader.settings import reset
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
    assert WarmKey.for_request(a) == WarmKey.for_request(b)
    # What a sandbox is started with (its tmpfs, rlimits, cgroup) does split the pool.
    assert WarmKey.for_request(a) != WarmKey.for_request(request(tmp_path, disk_mb=64))
    assert WarmKey.for_request(a) != WarmKey.for_request(request(tmp_path, memory_mb=1536))
    assert WarmKey.for_request(a).limits_for_start().disk_mb == Limits().disk_mb


def test_pool_size_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RDV_WARM_POOL", "0")
    reset()  # grader.settings reads the environment once: again now
    assert pool_plan.pool_size() == 0
    assert open_pool() is None
    monkeypatch.setenv("RDV_WARM_POOL", "3")
    reset()
    assert pool_plan.pool_size() == 3
    monkeypatch.delenv("RDV_WARM_POOL")
    reset()
    monkeypatch.setattr(pool_plan, "_available_mib", lambda: 24 * 1024)
    # Every launch of the longest grading ready ahead, on any number of cores.
    for cores in (1, 2, 3, 64):
        monkeypatch.setattr(pool_plan, "usable_cores", lambda cores=cores: cores)
        assert pool_plan.pool_size() == pool_plan.MAX_PLAN == 4
    # Never more than a quarter of the free memory: none where that is under one sandbox.
    monkeypatch.setattr(pool_plan, "_available_mib", lambda: 4 * pool_plan.IDLE_MIB)
    assert pool_plan.default_size() == 1
    monkeypatch.setattr(pool_plan, "_available_mib", lambda: 1000)
    assert pool_plan.default_size() == 0


def test_usable_cores_are_the_cpus_allowed_within_the_cgroup_quota(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(pool_plan, "_cgroup_cpu_quota", lambda: None)
    assert pool_plan.usable_cores() == 8
    monkeypatch.setattr(pool_plan, "_cgroup_cpu_quota", lambda: 2.5)  # cpu.max 250000 100000
    assert pool_plan.usable_cores() == 2
    monkeypatch.setattr(pool_plan, "_cgroup_cpu_quota", lambda: 0.5)
    assert pool_plan.usable_cores() == 1


# -- real sandboxes -------------------------------------------------------------------------


@pytest.fixture
def pool() -> Iterator[Pool]:
    with Pool(1, idle_s=600) as owned:
        yield owned


def grade_solution(code: str | None = None, pool: Pool | None = None) -> Result:
    from grader.api import grade
    from grader.exercises import load_spec

    spec = load_spec(EXERCISE)
    spec.launch.world_sizes = spec.launch.world_sizes[:1]
    spec.limits = spec.limits.model_copy(update={"wall_seconds": 120})
    job = Job(exercise=EXERCISE, code=code or SOLUTION.read_text(), spec=spec, submission_id="w")
    return grade(job, sandbox="bwrap", pool=pool)


@needs_bwrap
@pytest.mark.sandbox
def test_a_warm_sandbox_holds_nothing_of_a_learner_before_its_job(tmp_path: Path) -> None:
    prep = Preparation(Limits(), (), (("PATH", "/usr/bin:/bin"),), 120)
    sandbox = BwrapSandbox().prepare(prep)
    try:
        assert sandbox.wait_ready(120), sandbox.before_output()
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
def test_a_launch_is_served_warm_and_the_sandbox_is_used_once(pool: Pool) -> None:
    result = grade_solution(pool=pool)
    assert result.status == "pass", (result.summary, result.error)
    assert pool.stats.served == 1 and pool.stats.cold == 0, pool.stats
    # A fresh one is started for the next launch (the used one was destroyed).
    deadline = time.monotonic() + 120
    while pool.counts()["ready"] < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pool.counts()["ready"] == 1


@needs_bwrap
@pytest.mark.sandbox
@pytest.mark.slow
def test_a_dead_warm_sandbox_falls_back_to_a_cold_start(pool: Pool) -> None:
    # Kill the supervisor of every warm sandbox as soon as it is ready: nothing warm can serve.
    real_run = BwrapBox.run

    def run_after_its_death(self: BwrapBox, *args: object, **kwargs: object) -> object:
        assert self.proc is not None
        os.killpg(self.proc.pid, 9)
        self.proc.wait()
        return real_run(self, *args, **kwargs)  # type: ignore[arg-type]

    BwrapBox.run = run_after_its_death  # type: ignore[method-assign]
    try:
        result = grade_solution(pool=pool)
    finally:
        BwrapBox.run = real_run  # type: ignore[method-assign]
    assert result.status == "pass", (result.summary, result.error)
    assert result.launch is not None and result.launch.sandbox == "bwrap"
    assert pool.stats.cold >= 1 and pool.stats.served == 0, pool.stats


@needs_bwrap
@pytest.mark.sandbox
@pytest.mark.slow
def test_without_a_pool_launches_start_cold() -> None:
    result = grade_solution()
    assert result.status == "pass", (result.summary, result.error)
    assert result.launch is not None and result.launch.warm_launches == 0


def test_a_pool_whose_sandboxes_cannot_start_says_cold(tmp_path: Path) -> None:
    class Broken:
        name = "bwrap"

        def prepare(self, prep: Preparation) -> BwrapBox:
            raise OSError("no bwrap here")

    with Pool(1, sandboxes=lambda backend: Broken()) as pool:  # type: ignore[arg-type,return-value]
        req = SandboxRequest(workdir=tmp_path, argv=[sys.executable], env={}, limits=Limits())
        assert pool.run(req, ".rdv-config-x.json", None) is None
        assert pool.stats.failed_starts >= 1 and pool.stats.served == 0


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


def key(tmp_path: Path, ranks: int) -> WarmKey:
    """A key per rank count: a sandbox of one serves a launch of any size (its zygote forks the
    ranks), so the keys differ in a limit fixed at the sandbox's start as well."""
    return WarmKey.for_request(request(tmp_path, pids=200 + ranks), ranks=ranks)


def planner(size: int, *keys: WarmKey) -> Pool:
    pool = Pool(size, refill=False)
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


def test_without_a_core_beside_its_launches_the_pool_refills_between_gradings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.sandbox import pool as pool_module

    two = key(tmp_path, 2)
    one = key(tmp_path, 1)
    pool = planner(2, two, one)
    pool.idle.append((two, Idle()))  # type: ignore[arg-type]
    pool.busy, pool.position = 1, 1  # a grading made its first launch: it still needs `one`
    monkeypatch.setattr(pool_module, "usable_cores", lambda: 2)  # the 2-rank launch takes both
    assert pool._next_key()[0] == one
    pool.idle.append((one, Idle()))  # type: ignore[arg-type]
    pool.idle.pop(0)
    pool.position = 2  # its last launch runs: the next grading's sandbox waits until it ends
    assert pool._next_key()[0] is None
    pool.requested = two  # unless a launch waits for one
    assert pool._next_key()[0] == two
    pool.requested = None
    monkeypatch.setattr(pool_module, "usable_cores", lambda: 3)  # a core beside it: refill now
    assert pool._next_key()[0] == two


def test_with_gradings_queued_the_pool_refills_during_one_a_sandbox_per_core_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backlog (the owner's `queued`) needs the sandboxes anyway: on 2 cores, during a
    grading whose launch takes both, two start side by side instead of none until it ends."""
    from grader.sandbox import pool as pool_module

    monkeypatch.setattr(pool_module, "usable_cores", lambda: 2)
    two = key(tmp_path, 2)
    pool = planner(4, two)
    assert len(pool.threads) == 2  # one refill thread per core
    pool.busy, pool.position = 1, 1  # lesson 2's one launch runs
    assert pool._next_key()[0] is None  # nothing queued: refill once it ends
    pool.queued(5)
    assert pool._next_key()[0] == two
    pool.starting.append(two)
    assert pool._next_key()[0] == two  # the second refill thread starts one too
    pool.starting.append(two)
    assert pool._next_key()[0] is None  # one per thread
    pool.idle += [(two, Idle()), (two, Idle())]  # type: ignore[list-item]
    pool.starting.clear()
    assert pool._next_key()[0] == two
    pool.idle += [(two, Idle()), (two, Idle())]  # type: ignore[list-item]
    assert pool._next_key()[0] is None  # full: the pool's size holds
    pool.idle = []
    pool.queued(0)
    pool.busy = 0
    assert pool._next_key()[0] == two
    pool.starting.append(two)
    assert pool._next_key()[0] is None  # no backlog: one start at a time
    other = key(tmp_path, 3)
    pool.requested = other  # but a launch waiting for a kind none is starting gets its own
    assert pool._next_key()[0] == other


def test_sandboxes_a_new_plan_does_not_want_make_room(tmp_path: Path) -> None:
    two, three = key(tmp_path, 2), key(tmp_path, 3)
    pool = planner(1, two)
    old = Idle()
    pool.idle.append((two, old))  # type: ignore[arg-type]
    pool.want([three])
    started, dropped = pool._next_key()
    assert started == three and dropped == [old]


def test_a_warm_sandbox_starts_as_its_key_says(tmp_path: Path) -> None:
    from grader.sandbox.docker import DockerSandbox
    from grader.sandbox.prepared import supervisor_wait_argv

    prep = WarmKey.for_request(request(tmp_path), ranks=2).preparation(60)
    assert prep.idle_s == 60 and prep.limits == request(tmp_path).limits
    assert isinstance(pool_plan.sandbox_for(pool_plan.BWRAP), BwrapSandbox)
    docker_key = WarmKey.for_request(request(tmp_path), ("docker", "img", "1:1"), 1, 2)
    docker = pool_plan.sandbox_for(docker_key.backend)
    assert isinstance(docker, DockerSandbox) and (docker.image, docker.user) == ("img", "1:1")
    argv = supervisor_wait_argv(docker_key.preparation(60))
    assert argv[-1] == "--wait=60"  # a 2-node launch's sandbox is the same as any other's
    assert argv[1:4] == ["-u", "-m", "grader.inside.supervisor"]  # the ranks' interpreter flags
    assert supervisor_wait_argv(prep) == argv


def test_one_sandbox_serves_a_launch_of_any_size_and_any_nodes(tmp_path: Path) -> None:
    """Its zygote forks as many ranks as the launch has, and for a simulated multi-node job
    each node's agent: keys differ in neither."""
    req = request(tmp_path)
    assert WarmKey.for_request(req, ranks=2) == WarmKey.for_request(req, ranks=3)
    assert len({WarmKey.for_request(req, ranks=r) for r in (1, 2, 3)}) == 1
    assert WarmKey.for_request(req, ranks=1, nodes=2) == WarmKey.for_request(req, ranks=2)
    assert WarmKey.for_request(req, ranks=1, nodes=2) == WarmKey.for_request(req, ranks=2, nodes=2)
    other = request(tmp_path, pids=999)  # a limit fixed when the sandbox starts
    assert WarmKey.for_request(other, ranks=2) != WarmKey.for_request(req, ranks=2)


def test_a_hinted_exercise_becomes_the_pools_plan() -> None:
    """What a learner has open (grader.api.hint_exercise) replaces the plan the last grading
    of another exercise left: its launches, in order, are what the pool readies."""
    from grader.api import hint_exercise
    from grader.exercises import load_spec
    from grader.launch.plan import plan_launches

    pool = Pool(1, refill=False)  # the plan alone: nothing is started
    hint_exercise(load_spec(EXERCISE), pool, "bwrap")
    first = list(pool.plan)
    assert first
    env_launch = load_spec("torchrun-launch/env-launch")
    hint_exercise(env_launch, pool, "bwrap")
    assert len(pool.plan) == len(plan_launches(env_launch)) == 4
    assert pool.plan != first and pool.plan[-1].nodes == 2
