"""The warm pool's Docker half (grader.sandbox.docker's prepared boxes, grader.sandbox.pool)
against a small fake engine (tests/grader/fake_docker.py), and the supervisor's wait for a
config written in place. The real engine runs it in `make scale-test` (workers with a pool)."""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.contract import Limits
from grader.inside.config_wait import wait_for_config
from grader.sandbox import pool_plan
from grader.sandbox.base import Preparation, SandboxRequest
from grader.sandbox.docker import ROLE_WARM, DockerBox, DockerSandbox, container_kwargs
from grader.sandbox.pool import Pool
from grader.sandbox.pool_plan import BWRAP, WarmKey
from grader.sandbox.prepared import supervisor_argv, supervisor_wait_argv
from grader.sandbox.reaper import LABEL_ROLE, LABEL_SANDBOX, worker_container
from tests.grader.fake_docker import FakeEngine

IMAGE, USER = "rendezvous-grader:test", "10001:10001"
ENV = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
CONFIG = ".rdv-config-0123.json"


def backend(engine: FakeEngine) -> DockerSandbox:
    return DockerSandbox(IMAGE, USER, client=lambda: engine)


def warm_docker(engine: FakeEngine, limits: Limits | None = None) -> DockerBox:
    """A box as `DockerSandbox.prepare` makes it, not started yet."""
    prep = Preparation(limits or Limits(), (), tuple(ENV.items()), 600)
    argv = supervisor_wait_argv(prep)
    return DockerBox(backend(engine), prep.limits, [], ENV, argv, idle_s=600)


def job_dir(tmp_path: Path) -> Path:
    (tmp_path / "main.py").write_text("print('hello')\n")
    (tmp_path / CONFIG).write_text(json.dumps({"nonce": "n1", "world_size": 1}))
    return tmp_path


def launch(tmp_path: Path, limits: Limits | None = None) -> SandboxRequest:
    return SandboxRequest(
        workdir=job_dir(tmp_path),
        argv=[*supervisor_argv(), CONFIG],
        env=dict(ENV),
        limits=limits or Limits(),
    )


@pytest.fixture
def started() -> Iterator[tuple[FakeEngine, DockerBox]]:
    engine = FakeEngine()
    sandbox = warm_docker(engine)
    sandbox.start(None, None)
    try:
        yield engine, sandbox
    finally:
        sandbox.destroy()


def test_a_warm_container_is_locked_down_exactly_as_a_cold_one(
    started: tuple[FakeEngine, DockerBox], tmp_path: Path
) -> None:
    engine, sandbox = started
    assert sandbox.wait_ready(30), sandbox.before_output()
    [container] = engine.sandboxes()
    [holder] = engine.holders()
    assert holder.volume is not None
    volume = container.kwargs["volumes"]
    cold = container_kwargs(
        launch(tmp_path),
        image=IMAGE,
        user=USER,
        worker=worker_container(),
        work_volume=next(iter(volume)),
    )
    # Started on the still empty volume: no copy-up may make /work root's (see container_kwargs).
    assert volume == {holder.volume.name: {"bind": "/work", "mode": "rw,nocopy"}}
    warm_kwargs = dict(container.kwargs)
    # Only the command differs (the supervisor waits for its config) and the role label.
    assert warm_kwargs.pop("command") == ["-u", "-m", "grader.inside.supervisor", "--wait=600"]
    assert cold.pop("command") == ["-u", "-m", "grader.inside.supervisor", CONFIG]
    assert warm_kwargs.pop("labels") == {**cold.pop("labels"), LABEL_ROLE: ROLE_WARM}
    assert warm_kwargs == cold
    assert holder.labels[LABEL_SANDBOX] == "1" and holder.labels[LABEL_ROLE] == "work"
    # Nothing of a learner is in it before its job.
    assert holder.volume is not None and holder.volume.files == {}


def test_a_launch_is_served_once_and_everything_is_removed(
    started: tuple[FakeEngine, DockerBox], tmp_path: Path
) -> None:
    engine, sandbox = started
    assert sandbox.wait_ready(30)
    lines: list[str] = []
    outcome = sandbox.run(launch(tmp_path), CONFIG, lines.append)
    assert outcome is not None and outcome.sandbox == "docker" and outcome.warm
    assert outcome.exit_code == 0 and not outcome.timed_out and not outcome.oom_killed
    assert "rank 0 says hello" in outcome.output and "rank 0 says hello" in lines
    assert "supervisor starting" not in outcome.output  # start-up noise is not the launch's
    # The supervisor's report came back to the host's job dir.
    assert json.loads((tmp_path / ".rdv-report-n1.json").read_text()) == {"ranks": []}
    [container] = engine.sandboxes()
    [holder] = engine.holders()
    assert container.removed and holder.removed and holder.volume is not None
    assert holder.volume.removed
    assert not sandbox.alive() and not sandbox.ready()
    # Single use: a second launch is refused (None: the caller starts a cold one).
    assert sandbox.run(launch(tmp_path), CONFIG, None) is None


def test_the_config_is_the_last_file_copied_in(
    started: tuple[FakeEngine, DockerBox], tmp_path: Path
) -> None:
    engine, sandbox = started
    assert sandbox.wait_ready(30)
    seen: list[bytes] = []
    [holder] = engine.holders()
    put = holder.put_archive

    def spy(path: str, data: bytes) -> bool:
        seen.append(data)
        return put(path, data)

    holder.put_archive = spy  # type: ignore[method-assign]
    (tmp_path / "zz.txt").write_text("after the config in name order")
    assert sandbox.run(launch(tmp_path), CONFIG, None) is not None
    [archive] = seen
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
    assert names[-1] == CONFIG and sorted(names) == sorted([CONFIG, "main.py", "zz.txt"])


@pytest.mark.parametrize("behaviour", ["dies", "ends-before-job"])
def test_a_container_that_never_took_its_job_means_a_cold_start(
    behaviour: str, tmp_path: Path
) -> None:
    engine = FakeEngine(behaviour)
    sandbox = warm_docker(engine)
    sandbox.start(None, None)
    sandbox.wait_ready(30)
    deadline = time.monotonic() + 30
    while sandbox.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sandbox.alive()
    req = launch(tmp_path)
    assert sandbox.run(req, CONFIG, None) is None
    # The job dir is as it was: the cold sandbox finds its config there.
    assert (tmp_path / CONFIG).is_file() and (tmp_path / "main.py").is_file()
    assert all(c.removed for c in engine.containers.created)


def test_a_launch_whose_work_volume_was_lost_runs_again_cold(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = FakeEngine("holder-stops")
    sandbox = warm_docker(engine)
    sandbox.start(None, None)
    assert sandbox.wait_ready(30)
    with caplog.at_level("WARNING", logger="grader.sandbox.docker"):
        assert sandbox.run(launch(tmp_path), CONFIG, None) is None
    assert "holder stopped (status exited, exit 137" in caplog.text
    # The job dir still holds what a cold launch needs, and nothing of the lost run.
    assert (tmp_path / CONFIG).is_file() and not (tmp_path / ".rdv-report-n1.json").exists()
    assert all(c.removed for c in engine.containers.created)


def test_a_failed_start_leaves_nothing_behind() -> None:
    engine = FakeEngine()

    def refuse(**kwargs: object) -> None:
        raise RuntimeError("the engine said no")

    engine.containers.create = refuse  # type: ignore[method-assign,assignment]
    sandbox = warm_docker(engine)
    with pytest.raises(RuntimeError):
        sandbox.start(None, None)
    assert [v.removed for v in engine.volumes.by_name.values()] == [True]
    assert not sandbox.alive()


def test_the_supervisor_takes_a_config_only_once_it_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    whole = json.dumps({"nonce": "n", "world_size": 2, "env": {}})
    config = tmp_path / ".rdv-config-ab.json"
    for cut in (0, 1, len(whole) // 2, len(whole) - 1):
        config.write_text(whole[:cut])  # as the archive API leaves it mid-write
        assert wait_for_config(0.1) is None, whole[:cut]
    config.write_text(whole)
    assert wait_for_config(0.1) == Path(".rdv-config-ab.json")


# -- the pool serves the docker backend --------------------------------------------------------


def test_each_backend_has_its_own_sandboxes(tmp_path: Path) -> None:
    req = launch(tmp_path)
    docker_backend = pool_plan.warm_backend(DockerSandbox(image=IMAGE, user=USER))
    assert docker_backend == ("docker", IMAGE, USER)
    bwrap_key = WarmKey.for_request(req)
    docker_key = WarmKey.for_request(req, docker_backend)
    assert bwrap_key.backend == BWRAP and bwrap_key != docker_key
    other_image = WarmKey.for_request(req, ("docker", "other:1", USER))
    assert other_image != docker_key
    assert isinstance(pool_plan.sandbox_for(docker_key.backend), DockerSandbox)
    from grader.sandbox.bwrap import BwrapSandbox
    from grader.sandbox.nosandbox import NoSandbox

    assert isinstance(pool_plan.sandbox_for(bwrap_key.backend), BwrapSandbox)
    assert pool_plan.warm_backend(NoSandbox()) is None


def test_the_pool_serves_docker_launches_with_a_fresh_container_each(tmp_path: Path) -> None:
    engine = FakeEngine()
    docker = ("docker", IMAGE, USER)
    with Pool(1, sandboxes=lambda key_backend: backend(engine)) as pool:
        for i in range(2):
            work = tmp_path / str(i)
            work.mkdir()
            outcome = pool.run(launch(work), CONFIG, None, docker)
            assert outcome is not None and "rank 0 says hello" in outcome.output
        assert pool.stats.served == 2 and pool.stats.cold == 0
        served = [c for c in engine.sandboxes() if c.took_job]
        assert len(served) == 2 and all(c.removed for c in served)
    # Closing the pool removes the idle one it had started for the next launch.
    assert all(c.removed for c in engine.containers.created)
    assert all(v.removed for v in engine.volumes.by_name.values())


# -- nothing outlives the worker ----------------------------------------------------------------


def test_what_a_killed_worker_leaves_is_removed_by_its_keeper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A prepared box names every container and volume it made (`leftovers`); the pool's keeper
    (grader/sandbox/_keeper.py), at the end of its input when the worker died by SIGKILL,
    removes them through the engine. Here the keeper's cleanup runs against the fake engine; with
    the real one it goes through the docker SDK, and `reap_orphans` at the next start is the
    backstop where the engine was unreachable."""
    import docker

    from grader.sandbox import _keeper

    engine = FakeEngine()
    box = backend(engine).prepare(Preparation(Limits(), (), tuple(ENV.items()), 600))
    assert box.wait_ready(30), box.before_output()
    leftovers = box.leftovers()
    made = {c.id for c in engine.containers.created}
    assert set(leftovers.containers) == made and len(made) == 2  # sandbox and holder
    assert list(leftovers.volumes) == list(engine.volumes.by_name)
    monkeypatch.setattr(docker, "from_env", lambda: engine)
    _keeper.clean(leftovers)  # what the keeper does once the worker is gone
    assert all(c.removed for c in engine.containers.created)
    assert all(v.removed for v in engine.volumes.by_name.values())
    box.closed = True  # its owner is "dead": nothing more of it runs here


def test_a_cold_launch_is_the_same_box_started_with_its_work_dir(tmp_path: Path) -> None:
    """`DockerSandbox.run` = the box of `prepare`, its work dir copied in before the container
    starts: the launch runs, its files come back, and nothing of it is left in the engine."""
    engine = FakeEngine()
    outcome = backend(engine).run(launch(tmp_path))
    assert outcome.exit_code == 0 and not outcome.warm and "rank 0 says hello" in outcome.output
    assert (tmp_path / ".rdv-report-n1.json").is_file()  # what the launch wrote came back
    [sandbox] = engine.sandboxes()
    assert sandbox.took_job and LABEL_ROLE not in sandbox.labels  # not a prepared one
    assert all(c.removed for c in engine.containers.created)
    assert all(v.removed for v in engine.volumes.by_name.values())
