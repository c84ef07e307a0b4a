"""A grading's launches one after another against overlapped (grader.launch.schedule), per
exercise, in one run beside a bare torchrun of the lesson-2 solution.

    python -m benchmarks overlap_launches [--repeat=3] [--exercises=all|ID,ID] [--pool=2]
                                          [--parallel=N]

For every graded exercise's shipped solution (in-process `grader.api.grade`, bwrap, a warm pool of
`--pool` sandboxes readied for the exercise and idle before each timed grading), in turn:
RDV_PARALLEL_LAUNCHES=1 and =N (default: what this machine gets, `parallel_launches()`). Prints
the median seconds and the ratio to the baseline, each with the load average when taken, and the
CPU-seconds of the whole process tree per grading (the pool's refills included: the CPU a
grading costs the machine, overlapped or not). Exit 0 when every solution passed every time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

from benchmarks.grading_latency import bare_torchrun
from benchmarks.warm_pool import solution
from grader.api import grade, hint_exercise
from grader.contract import Job
from grader.exercises import graded_exercises, load_spec
from grader.launch.plan import plan_launches
from grader.sandbox.pool import Pool
from grader.sandbox.pool_plan import parallel_launches
from grader.settings import override

LESSON2 = "ddp-fundamentals/train"


def cpu_s() -> float:
    """CPU-seconds of this process and every child it waited for so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks overlap_launches")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--exercises", default="all")
    parser.add_argument("--pool", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=0, help="0: this machine's default")
    args = parser.parse_args(argv)
    wanted = graded_exercises() if args.exercises == "all" else args.exercises.split(",")
    parallel = args.parallel or parallel_launches()
    print(
        f"{os.cpu_count()} cores; overlapped: RDV_PARALLEL_LAUNCHES={parallel}; "
        f"warm pool K={args.pool}"
    )
    ok = True
    lesson2 = solution(LESSON2) or ""
    bare: list[float] = []
    with Pool(args.pool) as pool:
        for exercise in wanted:
            code = solution(exercise)
            if code is None:
                continue
            spec = load_spec(exercise)
            seconds: dict[int, list[float]] = {1: [], parallel: []}
            cpu: dict[int, list[float]] = {1: [], parallel: []}
            loads: dict[int, list[float]] = {1: [], parallel: []}
            for _round in range(args.repeat):
                bare.append(bare_torchrun(lesson2, 2))
                for each in (1, parallel):
                    hint_exercise(spec, pool, "bwrap")
                    pool.wait_idle_ready(180)
                    time.sleep(1.0)
                    job = Job(exercise=exercise, code=code, spec=spec, submission_id="overlap")
                    before, start = cpu_s(), time.monotonic()
                    with override(parallel_launches=each):
                        result = grade(job, sandbox="bwrap", pool=pool)
                    took = time.monotonic() - start
                    pool.wait_idle_ready(180)  # the refills this grading caused, counted in
                    cpu[each].append(cpu_s() - before)
                    seconds[each].append(took)
                    loads[each].append(os.getloadavg()[0])
                    if result.status != "pass":
                        ok = False
                        print(f"  {exercise} (parallel {each}): {result.status} {result.summary}")
            base = statistics.median(bare)
            cells = []
            for each in (1, parallel):
                s = statistics.median(seconds[each])
                cells.append(
                    f"{'one at a time' if each == 1 else f'{each} at once':>13}: {s:6.2f} s "
                    f"{s / base:5.2f}x, {statistics.median(cpu[each]):5.1f} CPU-s "
                    f"(load {statistics.median(loads[each]):.1f})"
                )
            launches = len(plan_launches(spec))
            row = f"  {exercise:42} {launches} launches | " + " | ".join(cells)
            print(row, flush=True)
    print(
        f"baseline: bare torchrun of the lesson-2 solution, 2 ranks, median of {len(bare)}: "
        f"{statistics.median(bare):.2f} s"
    )
    return 0 if ok else 1
