"""The warm pool against cold sandboxes and a bare torchrun, every figure from one run.

    python -m benchmarks warm_pool [--repeat=1] [--queued=20] [--exercises=all]

Prints, each with the load average when it was taken:
- a bare `torchrun --standalone --nproc-per-node 2` of the lesson-2 solution (the baseline);
- every exercise's shipped solution graded cold (RDV_WARM_POOL=0) and warm, seconds and ratio to
  the baseline (in-process `grader.api.grade`, as the app's executor and the worker call it);
- the memory the idle pool holds (the warm sandboxes' cgroups, supervisor with torch imported);
- N lesson-2 solutions queued at once on a worker-like thread pool of one thread per core, graded
  warm: total time against N single warm verdicts divided by the cores, and none lost.
"""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.grading_latency import bare_torchrun
from grader.api import grade
from grader.contract import Job, Result
from grader.exercises import exercise_dir, graded_exercises, load_spec
from grader.launch.host import prewarm_for
from grader.sandbox import pool_plan
from grader.sandbox.bwrap import BwrapSandbox
from grader.sandbox.pool import Pool

LESSON2 = "ddp-fundamentals/train"


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def solution(exercise: str) -> str | None:
    folder = exercise_dir(exercise)
    path = folder / "solution.py" if folder else None
    return path.read_text() if path and path.is_file() else None


def graded(exercise: str, code: str, tag: str, pool: Pool | None) -> tuple[float, Result]:
    job = Job(exercise=exercise, code=code, spec=load_spec(exercise), submission_id=tag)
    start = time.monotonic()
    result = grade(job, sandbox="bwrap", pool=pool)
    return time.monotonic() - start, result


def set_pool(old: Pool | None, size: int) -> Pool | None:
    """Close the pool the last figure used; a fresh one of `size` (0: none, every launch cold)."""
    if old is not None:
        old.close()
    return Pool(size) if size > 0 else None


def wait_ready(pool: Pool | None, count: int, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while pool is not None and time.monotonic() < deadline:
        if pool.counts()["ready"] >= count:
            return
        time.sleep(0.2)


def idle_memory_mib(pool: Pool | None) -> float:
    if pool is None:
        return 0.0
    total = 0
    with pool.cond:
        sandboxes = [s for _k, s in pool.idle]
    for sandbox in sandboxes:
        cgroup = getattr(sandbox, "cgroup", None)
        if cgroup is None:
            continue
        for name in ("memory.current", "memory.usage_in_bytes"):
            path = cgroup.dirs.get("memory", next(iter(cgroup.dirs.values()))) / name
            if Path(path).is_file():
                total += int(Path(path).read_text())
                break
    return total / 2**20


def main(argv: list[str]) -> int:
    opts = dict(a.lstrip("-").split("=", 1) for a in argv if "=" in a)
    repeat = int(opts.get("repeat", "1"))
    queued = int(opts.get("queued", "20"))
    wanted = opts.get("exercises", "all")
    exercises = [e for e in graded_exercises() if wanted == "all" or e in wanted.split(",")]
    cores = os.cpu_count() or 1
    size = pool_plan.default_size()
    base_code = solution(LESSON2)
    assert base_code is not None
    bare = [bare_torchrun(base_code, 2) for _ in range(repeat)]
    b = statistics.median(bare)
    print(f"bare torchrun, lesson-2 solution, 2 ranks: {b:.2f} s  1.00x  ({load()})", flush=True)
    print(f"pool size {size} (default for {cores} cores)")
    pool: Pool | None = None
    for exercise in exercises:
        code = solution(exercise)
        if code is None:
            continue
        pool = set_pool(pool, 0)
        cold = [graded(exercise, code, "cold", None) for _ in range(repeat)]
        cold_s = statistics.median(s for s, _ in cold)
        cold_load = load()
        pool = set_pool(pool, size)
        prewarm_for(load_spec(exercise), BwrapSandbox(), pool)
        wait_ready(pool, 1)
        hot = [graded(exercise, code, "warm", pool) for _ in range(repeat)]
        hot_s = statistics.median(s for s, _ in hot)
        hot_load = load()
        statuses = {r.status for _s, r in cold + hot}
        served = pool.stats.served if pool else 0
        print(
            f"  {exercise:45} cold {cold_s:6.2f} s {cold_s / b:5.2f}x ({cold_load}) | "
            f"warm {hot_s:6.2f} s {hot_s / b:5.2f}x ({hot_load}) | "
            f"{sorted(statuses)}, {served} launches served warm",
            flush=True,
        )
    pool = set_pool(pool, size)
    prewarm_for(load_spec(LESSON2), BwrapSandbox(), pool)
    wait_ready(pool, size)
    time.sleep(2)
    print(f"idle pool: {size} sandboxes, {idle_memory_mib(pool):.0f} MiB ({load()})", flush=True)
    if queued <= 0:
        set_pool(pool, 0)
        return 0
    single = statistics.median(graded(LESSON2, base_code, "single", pool)[0] for _ in range(repeat))
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=cores) as workers:
        results = list(
            workers.map(lambda i: graded(LESSON2, base_code, f"q{i}", pool), range(queued))
        )
    total = time.monotonic() - start
    passed = sum(r.status == "pass" for _s, r in results)
    ideal = queued * single / cores
    print(
        f"{queued} lesson-2 submissions queued at once, {cores} at a time, warm: {total:.1f} s "
        f"against {queued} x {single:.2f} s / {cores} cores = {ideal:.1f} s ({total / ideal:.2f}x);"
        f" {passed}/{queued} graded pass, {len(results)} results ({load()})",
        flush=True,
    )
    set_pool(pool, 0)
    return 0
