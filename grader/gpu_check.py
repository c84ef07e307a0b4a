"""`python -m grader.gpu_check [--cpu] [--json FILE]`: the GPU path in one command (make gpu-check).

On a GPU host (one or more NVIDIA GPUs, its own torch, no network, no bubblewrap: the host is
itself a sandbox, so the sandbox is "none" and the table says so) it grades:
- every exercise's solution and starter on the GPU path: the exercise's world sizes that fit the
  GPUs, one GPU per rank, NCCL where the program asks for the device's backend; what needs more
  GPUs than the host has (a world size, a resume across sizes, an injected fault, two nodes) is a
  row "not run" with the reason;
- purpose-made programs for what only a GPU shows (`scripts/gpu/programs/`): `device.pinned`
  right and wrong, `init_process_group()` without a backend followed by a CPU all-reduce (on a
  GPU host since torch 2.6 only the accelerator's backend exists, so it fails), fsdp-reshard's
  solution on CUDA, SyncBatchNorm's synchronised statistics and a two-node launch with one GPU
  per node (these two need two GPUs).

`--cpu` runs the same plan on CPU workers with gloo, as if the host had `--gpus` GPUs (1 by
default), so the table keeps its shape; CI runs it (`make gpu-check CPU=1`) so that the script
cannot rot between the rare days a GPU host is at hand.

One table (item, what, launch, backend, torch, verdict, expected, seconds) is printed and, with
`--json`, written; the exit status is 0 when every row is as expected.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader.contract import ExerciseSpec, Job, LaunchSpec, Result
from grader.exercises import graded_specs

PROGRAMS = Path(__file__).resolve().parent.parent / "scripts" / "gpu" / "programs"
# Minutes the whole check may take on the GPU host (its command limit is 10).
BUDGET_S = 8 * 60


@dataclass
class Case:
    """One grading to make, or a row that says why it is not made."""

    item: str  # exercise id or purpose-made program
    what: str  # "solution", "starter" or what the program shows
    code: str = ""
    spec: ExerciseSpec | None = None
    exercise: str = ""
    # The verdict that is right on this device ("pass" or "fail"); for a starter graded at a
    # subset of its world sizes "fail" is hoped for, not required (`strict` False).
    expected: str = "pass"
    strict: bool = True
    # A failed check id the verdict must hold (a program made to fail one check).
    must_fail: str | None = None
    not_run: str | None = None


@dataclass
class Row:
    item: str
    what: str
    launch: str
    backend: str
    torch: str
    verdict: str
    expected: str
    ok: bool
    seconds: float
    note: str = ""
    failed_checks: list[str] = field(default_factory=list)


def fitted(spec: ExerciseSpec, gpus: int, device: str) -> tuple[ExerciseSpec | None, str | None]:
    """The spec cut to what `gpus` GPUs can run on `device` ("cuda" | "cpu"), or the reason it
    cannot run. A spec that declares `device: cpu` runs as declared, on CPU workers."""
    launch = spec.launch
    if launch.device == "cpu":
        return spec, None
    sizes = [w for w in launch.world_sizes if w <= gpus]
    widest = max(launch.world_sizes)
    if not sizes:
        return None, f"needs {min(launch.world_sizes)} GPUs, one per rank; the host has {gpus}"
    if launch.resume and sizes != launch.world_sizes:
        return None, f"resumes across {launch.world_sizes} ranks: needs {widest} GPUs"
    if (launch.faults or launch.max_restarts) and widest > gpus:
        return None, f"injects a fault into a {widest}-rank run: needs {widest} GPUs"
    multinode = launch.multinode and gpus >= 2
    new_launch = launch.model_copy(
        update={"world_sizes": sizes, "device": device, "multinode": multinode}
    )
    return spec.model_copy(update={"launch": new_launch}), None


def exercise_cases(
    exercises: dict[str, tuple[ExerciseSpec, Path | None]], gpus: int, device: str
) -> list[Case]:
    cases: list[Case] = []
    for exercise, (original, folder) in exercises.items():
        spec, reason = fitted(original, gpus, device)
        every_size = spec is not None and spec.launch.world_sizes == original.launch.world_sizes
        for what in ("solution", "starter"):
            path = folder / f"{what}.py" if folder else None
            if path is None or not path.is_file():
                continue
            cases.append(
                Case(
                    item=exercise,
                    what=what,
                    code=path.read_text(encoding="utf-8"),
                    spec=spec,
                    exercise=exercise,
                    expected="pass" if what == "solution" else "fail",
                    strict=what == "solution" or every_size,
                    not_run=reason,
                )
            )
        if original.launch.multinode and spec is not None and not spec.launch.multinode:
            cases.append(
                Case(
                    item=exercise,
                    what="2-node launch, one GPU per node",
                    not_run=f"needs 2 GPUs; the host has {gpus}",
                )
            )
    return cases


def _program(name: str) -> str:
    return (PROGRAMS / name).read_text(encoding="utf-8")


def _pinned_spec(device: str) -> ExerciseSpec:
    return ExerciseSpec(
        checks=["run.completed", "dist.init", "device.pinned", "dist.cleanup"],
        launch=LaunchSpec(world_sizes=[1], device=device),
    )


def _runs_to_its_end(spec: ExerciseSpec, device: str) -> ExerciseSpec:
    """`spec` cut to one rank on `device`, judging only that the program ran to its end."""
    return ExerciseSpec(
        checks=["run.completed", "dist.init"],
        launch=LaunchSpec(world_sizes=[1], device=device),
        limits=spec.limits,
    )


def program_cases(
    exercises: dict[str, tuple[ExerciseSpec, Path | None]], gpus: int, device: str
) -> list[Case]:
    """What only a GPU shows; on CPU workers each program's CPU verdict is expected instead."""
    on_gpu = device == "cuda"
    fsdp, fsdp_dir = exercises["syncbn-sharded-state/fsdp-reshard"]
    fsdp_spec, fsdp_reason = fitted(fsdp, gpus, device)
    assert fsdp_dir is not None
    syncbn, syncbn_dir = exercises["syncbn-sharded-state/syncbn"]
    syncbn_spec, syncbn_reason = fitted(syncbn, gpus, device)
    assert syncbn_dir is not None
    no_backend = ExerciseSpec(
        checks=["run.completed", "dist.init", "dist.cleanup"],
        launch=LaunchSpec(world_sizes=[1], device=device),
    )
    return [
        Case(
            item="device.pinned",
            what="right: each rank on cuda:LOCAL_RANK",
            code=_program("pinned_right.py"),
            spec=_pinned_spec(device),
        ),
        Case(
            item="device.pinned",
            what="wrong: the model left on the CPU",
            code=_program("pinned_wrong.py"),
            spec=_pinned_spec(device),
            expected="fail" if on_gpu else "pass",
            must_fail="device.pinned" if on_gpu else None,
        ),
        Case(
            item="init_process_group()",
            what="no backend, then a CPU all-reduce",
            code=_program("no_backend_cpu_allreduce.py"),
            spec=no_backend,
            # torch >= 2.6 (PR 142216) makes only the accelerator's backend on a GPU host.
            expected="fail" if on_gpu else "pass",
            must_fail="run.completed" if on_gpu else None,
        ),
        Case(
            item="FSDP2",
            what=f"a sharded model trained on {device} (fully_shard, init_device_mesh)",
            code=_program("fsdp2_device.py"),
            spec=no_backend.model_copy(update={"limits": fsdp.limits}),
        ),
        Case(
            item="fsdp-reshard",
            what="solution, as its launch declares"
            if fsdp.launch.device == "cpu"
            else f"solution with FSDP2 on {device}"
            + (" (world size 1: it runs to its end)" if fsdp_reason else ""),
            code=(fsdp_dir / "solution.py").read_text(encoding="utf-8"),
            # With too few GPUs to reshard, one rank still shows whether the program runs on
            # the device at all (its model, data and targets on the GPU).
            spec=fsdp_spec or _runs_to_its_end(fsdp, device),
            exercise="syncbn-sharded-state/fsdp-reshard",
        ),
        Case(
            item="SyncBatchNorm",
            what="statistics synchronised across GPUs",
            code=(syncbn_dir / "solution.py").read_text(encoding="utf-8"),
            spec=syncbn_spec,
            exercise="syncbn-sharded-state/syncbn",
            not_run=syncbn_reason,
        ),
    ]


def _launch_text(spec: ExerciseSpec | None) -> str:
    if spec is None:
        return "-"
    launch = spec.launch
    sizes = ",".join(map(str, launch.world_sizes))
    nodes = " +2 nodes" if launch.multinode else ""
    return f"ws {sizes} {launch.device}{nodes}"


def run_case(case: Case, torch_version: str) -> Row:
    if case.not_run is not None or case.spec is None:
        return Row(
            item=case.item,
            what=case.what,
            launch=_launch_text(case.spec),
            backend="-",
            torch=torch_version,
            verdict="not run",
            expected=case.expected,
            ok=True,
            seconds=0.0,
            note=case.not_run or "",
        )
    from grader.api import grade

    job = Job(
        exercise=case.exercise or case.item,
        code=case.code,
        spec=case.spec,
        submission_id=f"gpu-check-{uuid.uuid4().hex[:8]}",
    )
    started = time.monotonic()
    result = grade(job, sandbox="none", pool=None)
    return _row(case, result, torch_version, time.monotonic() - started)


def _row(case: Case, result: Result, torch_version: str, seconds: float) -> Row:
    failed = [c.id for c in result.checks if c.status == "fail"]
    ok = result.status == case.expected and (case.must_fail is None or case.must_fail in failed)
    note = ""
    if result.status == "error":
        ok, note = False, (result.error or "")[:300]
    elif not ok and not case.strict and result.status == "pass":
        ok, note = True, "not caught at these world sizes"
    elif failed:
        note = "failed: " + ", ".join(failed)
    skipped = [c.id for c in result.checks if c.status == "skip"]
    if skipped:
        note = (note + "; " if note else "") + "not judged: " + ", ".join(skipped)
    launch = result.launch
    return Row(
        item=case.item,
        what=case.what,
        launch=_launch_text(case.spec),
        backend=launch.backend if launch else "-",
        torch=(launch.torch if launch and launch.torch else torch_version),
        verdict=result.status,
        expected=case.expected,
        ok=ok,
        seconds=round(seconds, 1),
        note=note,
        failed_checks=failed,
    )


def _cells(r: Row) -> list[str]:
    seconds, ok = f"{r.seconds:.1f}", "yes" if r.ok else "NO"
    return [r.item, r.what, r.launch, r.backend, r.torch, r.verdict, r.expected, seconds, ok]


def table(rows: list[Row]) -> str:
    heads = ["item", "what", "launch", "backend", "torch", "verdict", "expected", "s", "ok"]
    body = [_cells(r) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for r, b in zip(rows, body, strict=True):
        lines.append("  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)))
        if r.note:
            lines.append(f"    {r.note}")
    return "\n".join(lines)


def count_gpus() -> int:
    """GPUs the host's torch sees, asked in a child process (this one must not start CUDA)."""
    probe = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    return int(out.stdout.strip() or 0) if out.returncode == 0 else 0


def host_torch() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.gpu_check", description=__doc__)
    parser.add_argument("--cpu", action="store_true", help="CPU workers and gloo (CI)")
    parser.add_argument("--gpus", type=int, default=None, help="GPUs to plan for (--cpu: 1)")
    parser.add_argument("--json", type=Path, default=None, help="write the table as JSON here")
    parser.add_argument("--jobs", type=int, default=None, help="gradings at once")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds in all")
    parser.add_argument("--only", default="", help="rows whose item contains this text")
    args = parser.parse_args(argv)

    from grader import settings as grader_settings

    device = "cpu" if args.cpu else "cuda"
    gpus = args.gpus if args.gpus is not None else (1 if args.cpu else count_gpus())
    if not args.cpu and gpus == 0:
        print("No GPU is visible to torch here; run `make gpu-check CPU=1` on CPU.")
        return 2
    # CPU: no GPU at all, whatever the host has; GPU: the first `gpus` the host's torch sees.
    grader_settings.configure(sandbox="none", gpus=() if args.cpu else tuple(range(gpus)))
    version = host_torch()
    exercises = graded_specs()
    cases = exercise_cases(exercises, gpus, device) + program_cases(exercises, gpus, device)
    cases = [c for c in cases if args.only in c.item]
    jobs = args.jobs or (2 if args.cpu else 4)
    deadline = time.monotonic() + args.budget

    def guarded(case: Case) -> Row:
        if time.monotonic() > deadline and case.not_run is None:
            case.not_run = "not started: the check's time budget was spent"
        return run_case(case, version)

    print(
        f"GPU check: {gpus} {'simulated ' if args.cpu else ''}GPU(s), device {device}, "
        f"torch {version}, Python {platform.python_version()}, sandbox none (the host is "
        f"itself a sandbox), {len(cases)} rows",
        flush=True,
    )
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(guarded, cases))
    print(table(rows))
    bad = [r for r in rows if not r.ok]
    print(
        f"{sum(r.verdict == 'not run' for r in rows)} rows not run (the reason is under each); "
        f"{time.monotonic() - started:.0f} s"
    )
    print(f"gpu-check: {len(rows) - len(bad)} passed, {len(bad)} failed")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "device": device,
                    "gpus": gpus,
                    "torch": version,
                    "python": platform.python_version(),
                    "sandbox": "none",
                    "rows": [asdict(r) for r in rows],
                },
                indent=2,
            )
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
