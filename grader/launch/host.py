"""The host side of one launch (`run_launch`: job dir, sandbox request, framed output -> events,
report -> RunView); the launches themselves are planned in `grader.launch.plan`.

Nothing the learner's run produced is unpickled here: the report is plain JSON written by the
in-sandbox supervisor under a name only this process and the supervisor know.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from grader.checks.base import RankView, RunView
from grader.contract import ExerciseSpec, GradeEvent, Job
from grader.i18n import msg
from grader.launch.plan import Launch, launch_shape, plan_launches
from grader.launch.wire import (
    FRAME,
    Frame,
    HarnessSettings,
    PlacedFault,
    Report,
    SupervisorConfig,
)
from grader.sandbox.base import Sandbox, SandboxOutcome, SandboxRequest
from grader.sandbox.pool import Pool
from grader.sandbox.pool_plan import LATE_ENV, warm_backend
from grader.sandbox.prepared import supervisor_argv
from grader.settings import settings

log = logging.getLogger(__name__)

# Where the sandbox's private tmpfs /tmp is (isolating backends); "none" uses the job dir.
SANDBOX_TMP = "/tmp"
# Seconds the supervisor needs around the learner's run (its own torch import, stack dumps,
# checkpoint inspection); added to the sandbox's hard wall clock.
SUPERVISOR_SLACK_S = 25.0
WARM_RERUN_LOG = (
    "grading %s: a warm launch (world size %s; its job dir held %s) ended in a platform error; "
    "running it again cold: %s"
)
KILLED_EXIT = 128 + 9  # SIGKILL
# What a launch cancelled before any sandbox took it "ran" (its view is never judged).
CANCELLED = SandboxOutcome(
    exit_code=None, timed_out=True, oom_killed=False, duration_s=0.0, output="", sandbox="none"
)


def _env(job_dir: Path, sandbox: str, launch: Launch, max_restarts: int) -> dict[str, str]:
    env: dict[str, str] = {}
    tmp = Path(SANDBOX_TMP)
    if sandbox == "none":  # isolating backends give HOME and TMPDIR their own private tmpfs
        tmp, home = job_dir / ".tmp", job_dir / ".home"
        tmp.mkdir()
        home.mkdir()
        env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONPATH=os.pathsep.join(_host_paths()))
    env |= {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor"),
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, launch.gpus)),
    }
    if max_restarts:
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    return env


def _host_paths() -> list[str]:
    """What "none" (no isolation: the host's own Python) needs on the ranks' path beyond the
    interpreter's own: the grader's package, and directories the host added to its path (a
    GPU host runs its own torch with the grader's dependencies unpacked beside it, `make
    gpu-check`); the isolating backends mount the grader and the venv instead."""
    prefixes = tuple({sys.prefix, sys.base_prefix})
    grader_root = str(Path(__file__).resolve().parents[2])
    added = [
        p
        for p in sys.path
        if p and os.path.isdir(p) and not os.path.abspath(p).startswith(prefixes)
    ]
    return list(dict.fromkeys([grader_root, *added]))


def run_launch(
    job: Job,
    launch: Launch,
    sandbox: Sandbox,
    emit: Callable[[GradeEvent], None],
    pool: Pool | None = None,
    carry: Path | None = None,
    cancel: threading.Event | None = None,
) -> tuple[RunView, SandboxOutcome | None]:
    """One launch in a fresh job dir: in a prepared sandbox of `pool` when it has one, else cold.
    With `carry` (a directory of the host's, `launch.resume`) the job dir starts from its files and
    they are replaced by what the launch left there. Once `cancel` is set the launch is stopped
    (or never started) and its view is not to be judged."""
    spec = job.spec
    root = settings().jobs_dir
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
    job_dir = Path(tempfile.mkdtemp(prefix="rdv-job-", dir=root))
    try:
        job_dir.chmod(0o755)
        nonce = secrets.token_hex(16)
        config_name = f".rdv-config-{secrets.token_hex(8)}.json"
        env = _env(job_dir, sandbox.name, launch, spec.launch.max_restarts)
        backend = warm_backend(sandbox) if pool is not None else None
        config = SupervisorConfig(
            nonce=nonce,
            world_size=launch.world_size,
            nnodes=launch.nnodes,
            max_restarts=spec.launch.max_restarts,
            script_args=launch.script_args,
            wall_seconds=spec.limits.wall_seconds,
            output_cap=spec.limits.output_bytes_per_rank,
            sandboxed=sandbox.name != "none",
            harness=HarnessSettings(
                pg_timeout_seconds=spec.limits.pg_timeout_seconds,
                faults=tuple(PlacedFault.from_dict(f) for f in launch.faults),
                # Hooks that cost something in every run observe only for the checks that
                # need them (e.g. the gradient all-reduces of `accum.*`).
                checks=tuple(spec.checks),
            ),
            # A warm supervisor was started before this job: it takes these from the config.
            env={k: v for k, v in env.items() if k in LATE_ENV} if backend is not None else {},
            env_unset=tuple(k for k in LATE_ENV if k not in env) if backend is not None else (),
        )
        _stage(job_dir, job.code, config_name, config, carry=carry)
        request = SandboxRequest(
            workdir=job_dir,
            argv=[*supervisor_argv(), config_name],
            env=env,
            limits=spec.limits,
            gpus=launch.gpus,
            kill_after_s=spec.limits.wall_seconds + SUPERVISOR_SLACK_S,
            cancel=cancel,
        )
        noise: list[str] = []

        def on_output(line: str) -> None:
            frame = Frame.decode(line, nonce)
            if frame is None:
                if not line.startswith(f"{FRAME}{nonce}:") and len(noise) < 200:
                    noise.append(line)
                return
            if frame.kind == "output":
                emit(
                    GradeEvent(
                        kind="output",
                        rank=frame.rank,
                        data={"line": frame.line or "", "world_size": launch.world_size},
                    )
                )

        report_path = job_dir / f".rdv-report-{nonce}.json"
        if cancel is not None and cancel.is_set():  # no longer needed before it started
            return _view(job, launch, CANCELLED, report_path, noise), None
        outcome = (
            pool.run(request, config_name, on_output, backend, launch_shape(launch))
            if pool is not None and backend
            else None
        )
        view = _view(job, launch, outcome, report_path, noise) if outcome else None
        if cancel is not None and cancel.is_set():
            return view or _view(job, launch, CANCELLED, report_path, noise), outcome
        if view is not None and view.platform_error:
            # The warm sandbox failed us (its report lost, its launcher broken): the launch runs
            # again cold, from the job's files alone, rather than end the grading in an error.
            back = sorted(entry.name for entry in job_dir.iterdir())[:20]
            log.warning(
                WARM_RERUN_LOG, job.submission_id, launch.world_size, back, view.platform_error
            )
            _stage(job_dir, job.code, config_name, config, clear=True, carry=carry)
            noise.clear()
            view = None
        if outcome is None or view is None:  # no warm sandbox (off, none ready, it died): cold
            outcome = sandbox.run(request, on_output=on_output)
            view = _view(job, launch, outcome, report_path, noise)
        view.nnodes, view.faults = launch.nnodes, launch.faults
        view.warm = outcome.warm
        if carry is not None:
            _carry_out(job_dir, carry)
        return view, outcome
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)


def _stage(
    job_dir: Path,
    code: str,
    config_name: str,
    config: SupervisorConfig,
    *,
    clear: bool = False,
    carry: Path | None = None,
) -> None:
    """The job dir as a launch starts from it: the program and its config, and the files the
    previous launch left (`carry`), nothing else."""
    if clear:
        for entry in list(job_dir.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    if carry is not None and carry.is_dir():
        shutil.copytree(carry, job_dir, symlinks=True, dirs_exist_ok=True)
    (job_dir / "main.py").write_text(code, encoding="utf-8")
    (job_dir / config_name).write_text(config.to_json())


CARRY_SKIP = (".tmp", ".home", "main.py")


def _carry_out(job_dir: Path, carry: Path) -> None:
    """What a launch left in its job dir, for the next launch: the grader's own files (config,
    report, the private HOME and TMPDIR of an unsandboxed run) stay behind."""
    shutil.rmtree(carry, ignore_errors=True)
    with contextlib.suppress(OSError):  # shutil.Error too: what could be copied is
        shutil.copytree(
            job_dir,
            carry,
            symlinks=True,
            ignore=lambda d, names: [
                n for n in names if d == str(job_dir) and (n.startswith(".rdv-") or n in CARRY_SKIP)
            ],
        )


def _view(
    job: Job, launch: Launch, outcome: SandboxOutcome, report_path: Path, noise: list[str]
) -> RunView:
    report: Report | None = None
    # A supervisor killed outright (the memory limit, the hard wall clock) wrote no report: a
    # file of that name is then the program's own (forked ranks hold the nonce in their memory).
    killed = outcome.exit_code == KILLED_EXIT
    if report_path.is_file() and not killed:
        with contextlib.suppress(ValueError, OSError):  # WireError is a ValueError
            report = Report.from_json(report_path.read_text(encoding="utf-8"))
    view = RunView(
        world_size=launch.world_size,
        device=launch.device,
        ranks=[],
        source=job.code,
        wall_seconds=job.spec.limits.wall_seconds,
        oom_killed=outcome.oom_killed,
        timed_out=outcome.timed_out,
    )
    if report is None:
        if not (outcome.timed_out or outcome.oom_killed):
            tail = "\n".join(noise[-20:]) or outcome.output[-2000:]
            view.platform_error = msg(
                "platform.no_report",
                "the supervisor left no report (exit {code}, {seconds:.1f} s): {output}",
                code=outcome.exit_code,
                seconds=outcome.duration_s,
                output=tail,
            )
        # else: the job overwhelmed the sandbox before the supervisor could report (learner's).
        return view
    if report.launch_error:
        view.platform_error = msg(
            "platform.launch_failed",
            "the launcher failed: {error}",
            error=report.launch_error,
        )
        return view
    if report.inspect_error:
        log.error(
            "grading %s: checkpoint inspection failed:\n%s",
            job.submission_id,
            report.inspect_error,
        )
        view.platform_error = msg(
            "platform.inspect_failed",
            "the grader could not inspect the checkpoints (see the worker log)",
        )
        return view
    view.ranks = [
        RankView(
            rank=r.rank,
            exit_code=r.exit_code,
            output=r.output,
            truncated=r.truncated,
            stack=r.stack,
            events=list(r.events),
        )
        for r in report.ranks
    ]
    view.timed_out = report.timed_out
    view.checkpoints = dict(report.checkpoints)
    view.spare_ranks = report.spare_ranks
    return view


def prewarm_for(spec: ExerciseSpec, sandbox: Sandbox, pool: Pool | None) -> None:
    """Warm sandboxes of `sandbox` (bwrap or docker) in `pool` for every launch of `spec`,
    in order: a worker at start-up, and each grading as it begins (the pool then readies the next
    launches while one runs)."""
    backend = warm_backend(sandbox)
    if backend is None or pool is None:
        return
    plan = []
    for launch in plan_launches(spec):
        env = _env(Path("/nonexistent"), backend[0], launch, spec.launch.max_restarts)
        req = SandboxRequest(
            workdir=Path("/"), argv=[], env=env, limits=spec.limits, gpus=launch.gpus
        )
        plan.append((req, launch_shape(launch)))
    pool.prewarm(plan, backend)
