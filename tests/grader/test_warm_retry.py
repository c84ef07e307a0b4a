"""A warm launch that ends in a platform error (its report lost with a dead sandbox's work dir,
its launcher broken) is run again cold from the job's own files: the learner gets the verdict a
cold grading gives, never the pool's failure. Graded for real, the cold run in sandbox "none"."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.api import grade
from grader.contract import ExerciseSpec, Job
from grader.launch import host as launcher
from grader.launch.wire import SupervisorConfig
from grader.sandbox.base import OutputCallback, SandboxOutcome, SandboxRequest
from grader.sandbox.pool import Pool
from grader.sandbox.pool_plan import BWRAP, Backend

pytestmark = [pytest.mark.sandbox]

# Passes only in a clean job dir: the lost warm run left files behind that a cold one must not see.
PROGRAM = """
import os
import torch.distributed as dist
dist.init_process_group("gloo")
assert not os.path.exists("lost-run.txt"), "the warm run's files leaked into the cold one"
print(f"rank {dist.get_rank()} of {dist.get_world_size()} in a clean dir", flush=True)
dist.destroy_process_group()
"""


def test_a_warm_launch_that_lost_its_report_runs_again_cold(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    served: list[str] = []

    class LosingPool(Pool):
        def run(
            self,
            req: SandboxRequest,
            config_name: str,
            on_output: OutputCallback | None,
            backend: Backend = BWRAP,
            shape: tuple[int, int] = (0, 1),
        ) -> SandboxOutcome:
            return lost_report(req, config_name, on_output, backend, shape)

    def lost_report(
        req: SandboxRequest,
        config_name: str,
        on_output: OutputCallback | None,
        backend: Backend,
        shape: tuple[int, int],
    ) -> SandboxOutcome:
        # What a warm sandbox whose work volume vanished hands back: its program ran (files,
        # output) and exited 0, but the report did not come back.
        served.append(config_name)
        assert (req.workdir / config_name).is_file() and (req.workdir / "main.py").is_file()
        (req.workdir / "lost-run.txt").write_text("written by the run whose report was lost")
        (req.workdir / "ckpt").mkdir()
        return SandboxOutcome(
            exit_code=0,
            timed_out=False,
            oom_killed=False,
            duration_s=0.8,
            output="[W socket.cpp:207] [c10d] noise\n",
            sandbox="bwrap",
            warm=True,
        )

    monkeypatch.setattr(launcher, "warm_backend", lambda sandbox: BWRAP)
    pool = LosingPool(1, refill=False)  # serves every launch itself: nothing is prepared
    spec = ExerciseSpec.model_validate(
        {"checks": ["run.completed"], "launch": {"world_sizes": [2]}}
    )
    job = Job(exercise="ddp-fundamentals/train", code=PROGRAM, spec=spec, submission_id="w1")
    with caplog.at_level("WARNING", logger="grader.launch.host"):
        result = grade(job, sandbox="none", pool=pool)
    assert len(served) == 1
    assert result.status == "pass", result.model_dump_json(indent=1)[:3000]
    assert "ended in a platform error; running it again cold" in caplog.text
    assert "no report" in caplog.text and "'lost-run.txt'" in caplog.text
    assert result.launch is not None and result.launch.warm_launches == 0
    assert {r.rank for r in result.ranks} == {0, 1}
    assert all("in a clean dir" in r.output for r in result.ranks)


def test_a_job_dir_is_staged_afresh(tmp_path: Path) -> None:
    (tmp_path / "left.bin").write_bytes(b"x")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "link").symlink_to("/etc")
    config = SupervisorConfig(nonce="n", world_size=1, wall_seconds=5.0, output_cap=1000)
    launcher._stage(tmp_path, "print(1)\n", ".rdv-config-a.json", config, clear=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".rdv-config-a.json", "main.py"]
    assert (tmp_path / "main.py").read_text() == "print(1)\n"
    assert Path("/etc").is_dir()
