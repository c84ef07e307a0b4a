"""Grading latency: the lesson-2 solution graded in the sandbox vs a bare `torchrun` of it.

Both are measured in the same run, alternating, so machine load hits both alike; the ratio of the
medians is the figure (grading does more: a sandbox, a harness in every rank, a first-step replay,
checkpoint inspection, the checks).

    python -m benchmarks grading_latency [--repeat=3] [--sandbox=bwrap]

Each grading starts with the warm pool (RDV_WARM_POOL; 0: cold) readied for it and idle, as a
learner's submission finds it once the editor has told the server which exercise is open; the bare
torchrun also runs on an idle pool.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.api import grade, hint_exercise
from grader.contract import Job
from grader.exercises import load_spec
from grader.sandbox.pool import Pool, open_pool

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "lessons" / "02-ddp-fundamentals" / "exercises" / "train" / "solution.py"
EXERCISE = "ddp-fundamentals/train"


def bare_torchrun(code: str, world_size: int) -> float:
    """Seconds for `torchrun --standalone --nproc-per-node N main.py` in a fresh dir."""
    with tempfile.TemporaryDirectory(prefix="rdv-bench-") as tmp:
        (Path(tmp) / "main.py").write_text(code)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={world_size}",
            "main.py",
        ]
        for attempt in (1, 2):
            start = time.monotonic()
            done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, timeout=600)
            elapsed = time.monotonic() - start
            if done.returncode == 0:
                return elapsed
            # torch's own run failed (seen once: a rank aborted, SIGABRT): say so, and once
            # more, as the baseline is a bare torchrun's time, not ours to judge.
            errors = [ln for ln in done.stderr.decode().splitlines() if not ln.startswith("W")]
            print(f"  bare torchrun failed (attempt {attempt}): " + " | ".join(errors[:12])[:1500])
        raise RuntimeError("bare torchrun failed twice")


def graded(
    code: str, sandbox: str | None, pool: Pool | None, one_launch: bool = False
) -> tuple[float, str, dict[str, int]]:
    spec = load_spec(EXERCISE)
    if one_launch:  # only the first world size: the cost of one graded launch
        spec.launch.world_sizes = spec.launch.world_sizes[:1]
    job = Job(exercise=EXERCISE, code=code, spec=spec, submission_id="bench")
    # As a learner's submission finds it: the pool readied for this exercise while they typed
    # (the server's draft routes do it, app.submissions.backends.LocalBackend.hint_exercise).
    if pool is not None:
        hint_exercise(spec, pool, sandbox)
    settle(pool)
    start = time.monotonic()
    result = grade(job, sandbox=sandbox, pool=pool)
    elapsed = time.monotonic() - start
    if result.status != "pass":
        raise RuntimeError(f"the solution did not pass: {result.summary} {result.error or ''}")
    return elapsed, result.launch.sandbox if result.launch else "?", result.timings_ms.model_dump()


def settle(pool: Pool | None) -> None:
    """Wait until the warm pool (if any) holds its plan ready and idle, so that neither a timed
    grading nor the bare torchrun shares the cores with sandboxes starting."""
    if pool is not None and pool.plan and not pool.wait_idle_ready(300):
        print("  (the warm pool was not ready after 300 s)", flush=True)


def main(argv: list[str]) -> int:
    opts = dict(a.lstrip("-").split("=", 1) for a in argv if "=" in a)
    repeat = int(opts.get("repeat", "3"))
    sandbox = opts.get("sandbox")
    code = SOLUTION.read_text()
    world_size = load_spec(EXERCISE).launch.world_sizes[0]
    bare: list[float] = []
    spawned: list[float] = []
    single: list[float] = []
    pool = open_pool()  # RDV_WARM_POOL (0: every grading cold)
    for i in range(repeat):
        settle(pool)
        bare.append(bare_torchrun(code, world_size))
        seconds, used, timings = graded(code, sandbox, pool)
        spawned.append(seconds)
        single.append(graded(code, sandbox, pool, one_launch=True)[0])
        print(
            f"  run {i + 1}: bare torchrun {bare[-1]:.2f} s | graded ({used}) {seconds:.2f} s "
            f"[launch {timings['run'] / 1000:.2f} s, checks {timings['checks']} ms] | "
            f"one graded launch {single[-1]:.2f} s",
            flush=True,
        )
    b = statistics.median(bare)
    s, one = statistics.median(spawned), statistics.median(single)
    sizes = load_spec(EXERCISE).launch.world_sizes
    print(
        f"grading latency, lesson-2 solution, {world_size} ranks, n={repeat}, warm pool "
        f"{pool.size if pool else 0} (ready before each grading), load average "
        f"{os.getloadavg()[0]:.1f}:\n"
        f"  bare torchrun          {b:6.2f} s  1.00x\n"
        f"  graded, world sizes {sizes} (ranks spawned) {s:6.2f} s  {s / b:.2f}x\n"
        f"  graded, one launch of {world_size} ranks (spawned) {one:6.2f} s  {one / b:.2f}x"
    )
    if pool is not None:
        pool.close()
    return 0
