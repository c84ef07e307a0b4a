"""The launches of one grading: which ones (`plan_launches`), and the host side of each
(`run_launch`: job dir, sandbox request, framed output -> events, report -> RunView).

Nothing the learner's run produced is unpickled here: the report is plain JSON written by the
in-sandbox supervisor under a name only this process and the supervisor know.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.checks.base import RankView, RunView
from grader.contract import ExerciseSpec, GradeEvent, Job
from grader.i18n import msg
from grader.sandbox.base import Sandbox, SandboxOutcome, SandboxRequest
from grader.supervisor import FRAME
from grader.warm import BWRAP, LATE_ENV, pool_size, prewarm, run_warm, warm_backend

log = logging.getLogger(__name__)

JOBS_DIR_ENV = "RDV_JOBS_DIR"
GPUS_ENV = "RDV_GPUS"
# Where the sandbox's private tmpfs /tmp is (isolating backends); "none" uses the job dir.
SANDBOX_TMP = "/tmp"
# Seconds the supervisor needs around the learner's run (its own torch import, stack dumps,
# checkpoint inspection); added to the sandbox's hard wall clock.
SUPERVISOR_SLACK_S = 25.0
WARM_RERUN_LOG = (
    "grading %s: a warm launch (world size %s; its job dir held %s) ended in a platform error; "
    "running it again cold: %s"
)


@dataclass
class Launch:
    world_size: int
    device: str  # "cpu" | "cuda"
    gpus: list[int]
    # > 1: a simulated job of that many nodes with world_size // nnodes ranks each.
    nnodes: int = 1
    # The faults the harness injects into this launch.
    faults: list[dict[str, Any]] = field(default_factory=list)
    # Index (in the plan) of the uninterrupted twin of a faulted launch.
    reference: int | None = None
    # A reference is launched only to be compared with; its checks are not evaluated.
    judged: bool = True


FORK_ENV = "RDV_FORK_RANKS"
KILLED_EXIT = 128 + 9  # SIGKILL


def fork_ranks() -> bool:
    """Fork the ranks from the supervisor (torch imported once) instead of spawning fresh
    interpreters: $RDV_FORK_RANKS=1. Faster, but not the default, cold or warm: forked ranks
    share the supervisor's str hash seed (PYTHONHASHSEED), so set iteration order is the same on
    every rank, which a spawned rank's is not (tests/grader/test_warm_fidelity.py)."""
    return os.environ.get(FORK_ENV) == "1"


def warm_pool_enabled() -> bool:
    """Launches in bwrap or docker take a pre-started sandbox from the warm pool (grader.warm)
    unless $RDV_WARM_POOL=0."""
    return pool_size() > 0


def available_gpus() -> list[int]:
    """GPU indices this worker may use: $RDV_GPUS ("0,1") or the /dev/nvidiaN devices."""
    env = os.environ.get(GPUS_ENV)
    if env is not None:
        return [int(x) for x in env.split(",") if x.strip()]
    names = os.listdir("/dev") if os.path.isdir("/dev") else []
    return sorted(int(m.group(1)) for n in names if (m := re.fullmatch(r"nvidia(\d+)", n)))


def plan_launch(world_size: int, device: str) -> Launch:
    """NCCL with one GPU per rank where there are enough GPUs, else gloo on CPU."""
    gpus = available_gpus() if device in ("auto", "cuda") else []
    if len(gpus) >= world_size:
        return Launch(world_size, "cuda", gpus[:world_size])
    return Launch(world_size, "cpu", [])


def plan_launches(spec: ExerciseSpec) -> list[Launch]:
    """Every launch one grading makes, in order.

    - one launch per world size of the spec;
    - with `launch.faults`: each of those launches gets an uninterrupted twin, run first and not
      judged on its own: it is the faulted launch's `reference` (elastic.equivalent compares them);
    - with `launch.multinode`: one more launch as a simulated job of `max(2, launch.nnodes)` nodes
      with one rank each (LOCAL_RANK is 0 on every node, so local-vs-global rank mix-ups show;
      `grader.multinode` runs it).
    """
    device = spec.launch.device
    faults = [f.model_dump() for f in spec.launch.faults]
    launches: list[Launch] = []
    for ws in spec.launch.world_sizes:
        if faults:
            launches.append(dataclasses.replace(plan_launch(ws, device), judged=False))
            faulted = plan_launch(ws, device)
            faulted.faults, faulted.reference = faults, len(launches) - 1
            launches.append(faulted)
        else:
            launches.append(plan_launch(ws, device))
    if spec.launch.multinode:
        nodes = max(2, spec.launch.nnodes)
        launches.append(dataclasses.replace(plan_launch(nodes, device), nnodes=nodes))
    return launches


def _env(job_dir: Path, sandbox: str, launch: Launch, max_restarts: int) -> dict[str, str]:
    env: dict[str, str] = {}
    tmp = Path(SANDBOX_TMP)
    if sandbox == "none":  # isolating backends give HOME and TMPDIR their own private tmpfs
        tmp, home = job_dir / ".tmp", job_dir / ".home"
        tmp.mkdir()
        home.mkdir()
        env.update(HOME=str(home), TMPDIR=str(tmp))
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


def run_launch(
    job: Job,
    launch: Launch,
    sandbox: Sandbox,
    emit: Callable[[GradeEvent], None],
    carry: Path | None = None,
) -> tuple[RunView, SandboxOutcome | None]:
    """One launch in a fresh job dir. With `carry` (a directory of the host's, `launch.resume`)
    the job dir starts from its files and they are replaced by what the launch left there."""
    spec = job.spec
    root = os.environ.get(JOBS_DIR_ENV)
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    job_dir = Path(tempfile.mkdtemp(prefix="rdv-job-", dir=root))
    try:
        job_dir.chmod(0o755)
        nonce = secrets.token_hex(16)
        config_name = f".rdv-config-{secrets.token_hex(8)}.json"
        config = {
            "nonce": nonce,
            "world_size": launch.world_size,
            "nnodes": launch.nnodes,
            "max_restarts": spec.launch.max_restarts,
            "script_args": spec.launch.script_args,
            "wall_seconds": spec.limits.wall_seconds,
            "output_cap": spec.limits.output_bytes_per_rank,
            "sandboxed": sandbox.name != "none",
            "fork": fork_ranks(),
            "harness": {
                "pg_timeout_seconds": spec.limits.pg_timeout_seconds,
                "faults": launch.faults,
                # Hooks that cost something in every run observe only for the checks that
                # need them (e.g. the gradient all-reduces of `accum.*`).
                "checks": list(spec.checks),
            },
        }
        env = _env(job_dir, sandbox.name, launch, spec.launch.max_restarts)
        backend = warm_backend(sandbox) if warm_pool_enabled() else None
        if backend is not None:
            # A warm supervisor was started before this job: it takes these from the config.
            config["env"] = {k: v for k, v in env.items() if k in LATE_ENV}
            config["env_unset"] = [k for k in LATE_ENV if k not in env]
        _stage(job_dir, job.code, config_name, config, carry=carry)
        request = SandboxRequest(
            workdir=job_dir,
            argv=[sys.executable, "-m", "grader.supervisor", config_name],
            env=env,
            limits=spec.limits,
            gpus=launch.gpus,
            kill_after_s=spec.limits.wall_seconds + SUPERVISOR_SLACK_S,
        )
        prefix = f"{FRAME}{nonce}:"
        noise: list[str] = []

        def on_output(line: str) -> None:
            if not line.startswith(prefix):
                if len(noise) < 200:
                    noise.append(line)
                return
            try:
                frame = json.loads(line[len(prefix) :])
            except ValueError:
                return
            if frame.get("kind") == "output":
                emit(
                    GradeEvent(
                        kind="output",
                        rank=frame.get("rank"),
                        data={"line": frame.get("line", ""), "world_size": launch.world_size},
                    )
                )

        report_path = job_dir / f".rdv-report-{nonce}.json"
        outcome = (
            run_warm(request, config_name, on_output, backend, spares_for(launch))
            if backend
            else None
        )
        view = _view(job, launch, outcome, report_path, noise) if outcome else None
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
    config: dict[str, Any],
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
    (job_dir / config_name).write_text(json.dumps(config))


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
    report: dict[str, Any] | None = None
    # A supervisor killed outright (the memory limit, the hard wall clock) wrote no report: a
    # file of that name is then the program's own (forked ranks hold the nonce in their memory).
    killed = outcome.exit_code == KILLED_EXIT
    if report_path.is_file() and not killed:
        with contextlib.suppress(ValueError, OSError):
            report = json.loads(report_path.read_text(encoding="utf-8"))
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
    if report.get("launch_error"):
        view.platform_error = msg(
            "platform.launch_failed",
            "the launcher failed: {error}",
            error=str(report["launch_error"]),
        )
        return view
    if report.get("inspect_error"):
        log.error(
            "grading %s: checkpoint inspection failed:\n%s",
            job.submission_id,
            report["inspect_error"],
        )
        view.platform_error = msg(
            "platform.inspect_failed",
            "the grader could not inspect the checkpoints (see the worker log)",
        )
        return view
    view.ranks = [
        RankView(
            rank=int(r["rank"]),
            exit_code=r.get("exit_code"),
            output=r.get("output", ""),
            truncated=bool(r.get("truncated")),
            stack=r.get("stack"),
            events=r.get("events", []),
        )
        for r in report.get("ranks", [])
    ]
    view.timed_out = bool(report.get("timed_out"))
    view.checkpoints = report.get("checkpoints") or {}
    view.spare_ranks = int(report.get("spare_ranks") or 0)
    return view


def spares_for(launch: Launch) -> tuple[int, int]:
    """(spare ranks per node, nodes) a warm sandbox starts for `launch` (grader.spares): one
    spare per rank, and for a simulated multi-node job an agent per node with its own; no spare
    ranks where they are forked from the supervisor."""
    per_node = 0 if fork_ranks() else launch.world_size // launch.nnodes
    return per_node, launch.nnodes


def prewarm_for(spec: ExerciseSpec, sandbox: Sandbox | None = None) -> None:
    """Warm sandboxes of `sandbox` (bwrap or docker; default bwrap) for every launch of `spec`,
    in order: a worker at start-up, and each grading as it begins (the pool then readies the next
    launches while one runs)."""
    backend = warm_backend(sandbox) if sandbox is not None else BWRAP
    if backend is None or not warm_pool_enabled():
        return
    plan = []
    for launch in plan_launches(spec):
        env = _env(Path("/nonexistent"), backend[0], launch, spec.launch.max_restarts)
        req = SandboxRequest(
            workdir=Path("/"), argv=[], env=env, limits=spec.limits, gpus=launch.gpus
        )
        plan.append((req, spares_for(launch)))
    prewarm(plan, backend)
