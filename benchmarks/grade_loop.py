"""Grade the same correct file many times: every run must pass (torch's rare teardown abort after a
finished DDP run included). Prints one line per run and the tally.

    python -m benchmarks grade_loop [--times=10] [--sandbox=bwrap] [--file=PATH]
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
SOLUTION = ROOT / "lessons" / "02-ddp-fundamentals" / "exercises" / "train" / "solution.py"
EXERCISE = "ddp-fundamentals/train"


def main(argv: list[str]) -> int:
    opts = dict(a.lstrip("-").split("=", 1) for a in argv if "=" in a)
    times = int(opts.get("times", "10"))
    path = Path(opts.get("file", SOLUTION))
    spec = load_spec(EXERCISE)
    code = path.read_text()
    tally: collections.Counter[str] = collections.Counter()
    aborted_teardown = 0
    for i in range(times):
        start = time.monotonic()
        job = Job(exercise=EXERCISE, code=code, spec=spec, submission_id=f"loop-{i}")
        result = grade(job, sandbox=opts.get("sandbox"))
        tally[result.status] += 1
        codes = [r.exit_code for r in result.ranks]
        aborted_teardown += any(c not in (0, None) for c in codes) and result.status == "pass"
        failing = [c.id for c in result.checks if c.status == "fail"]
        print(
            f"  run {i + 1:3d}/{times}: {result.status:5s} {time.monotonic() - start:6.1f} s "
            f"sizes {spec.launch.world_sizes} exit codes {codes} "
            f"{'failing ' + ','.join(failing) if failing else ''}{result.error or ''}",
            flush=True,
        )
    sandbox = result.launch.sandbox if result.launch else opts.get("sandbox")
    print(
        f"tally for {path.name} x{times} (sandbox {sandbox}, load average "
        f"{os.getloadavg()[0]:.1f}): "
        + ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
        + f"; runs with a non-zero rank exit judged by the end record: {aborted_teardown}"
    )
    return 0 if tally["pass"] == times else 1
