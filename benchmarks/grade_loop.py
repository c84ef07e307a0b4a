"""Grade the same file many times: every run must get the expected verdict (a correct file passes,
torch's rare teardown abort after a finished DDP run included). One line per run, then the tally.

    python -m benchmarks grade_loop [--times=10] [--sandbox=bwrap] [--exercise=ID] [--file=PATH]
                                    [--expect=pass|fail]

The file defaults to the exercise's shipped solution (lessons/*/exercises/<name>/solution.py).
"""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path

from grader.api import grade
from grader.contract import Job
from grader.exercises import load_spec

ROOT = Path(__file__).resolve().parent.parent
EXERCISE = "ddp-fundamentals/train"


def shipped_solution(exercise: str) -> Path:
    name = exercise.split("/")[1]
    (path,) = ROOT.glob(f"lessons/*/exercises/{name}/solution.py")
    return path


def main(argv: list[str]) -> int:
    opts = dict(a.lstrip("-").split("=", 1) for a in argv if "=" in a)
    times = int(opts.get("times", "10"))
    exercise = opts.get("exercise", EXERCISE)
    expect = opts.get("expect", "pass")
    path = Path(opts["file"]) if "file" in opts else shipped_solution(exercise)
    spec = load_spec(exercise)
    code = path.read_text()
    tally: collections.Counter[str] = collections.Counter()
    aborted_teardown = 0
    for i in range(times):
        start = time.monotonic()
        job = Job(exercise=exercise, code=code, spec=spec, submission_id=f"loop-{i}")
        result = grade(job, sandbox=opts.get("sandbox"))
        tally[result.status] += 1
        codes = [r.exit_code for r in result.ranks]
        aborted_teardown += any(c not in (0, None) for c in codes) and result.status == expect
        failing = [c.id for c in result.checks if c.status == "fail"]
        print(
            f"  run {i + 1:3d}/{times}: {result.status:5s} {time.monotonic() - start:6.1f} s "
            f"sizes {spec.launch.world_sizes} exit codes {codes} "
            f"{'failing ' + ','.join(failing) if failing else ''}{result.error or ''}",
            flush=True,
        )
    sandbox = result.launch.sandbox if result.launch else opts.get("sandbox")
    print(
        f"tally for {exercise} {path.name} x{times}, expected {expect} (sandbox {sandbox}, "
        f"load average {os.getloadavg()[0]:.1f}): "
        + ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
        + f"; runs with a non-zero rank exit judged by the end record: {aborted_teardown}"
    )
    return 0 if tally[expect] == times else 1
