"""Issue 25: the find-the-hang exercise's verdicts through the API, its solution (three launches
that finish) and its starter (the first launch ends at the process group's timeout), each as a
ratio to a bare torchrun of the lesson-2 solution measured in the same run, before each.

    python -m benchmarks hang_verdicts [--repeat=1] [--pool=2]

One server (`python -m app serve` with the bwrap sandbox, RDV_WARM_POOL=pool), one learner who
saves a draft and submits through the REST API, as api_verdicts does. Every figure is printed
with the 1-minute load average when it was taken. Exit status 0 when the solution passed and the
starter failed every time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics

import httpx

from benchmarks import _learner
from benchmarks.grading_latency import bare_torchrun
from grader.exercises import exercise_dir

EXERCISE = "torchrun-launch/find-the-hang"
LESSON2 = "ddp-fundamentals/train"


def _code(exercise: str, kind: str) -> str:
    folder = exercise_dir(exercise)
    assert folder is not None, exercise
    return (folder / f"{kind}.py").read_text()


async def _run(repeat: int, pool: int) -> bool:
    ok = True
    bare: list[float] = []
    took: dict[str, list[float]] = {"solution": [], "starter": []}
    with _learner.served(f"pool {pool}", {"RDV_WARM_POOL": str(pool)}) as server:
        async with httpx.AsyncClient(
            base_url=server.base, timeout=httpx.Timeout(600, connect=30)
        ) as http:
            learner = await _learner.sign_up(http, "learner@example.org")
            lesson2 = _code(LESSON2, "solution")
            first = await _learner.submit_and_follow(http, learner, LESSON2, lesson2)
            print(f"  a first submission, untimed: {first.verdict_s or 0:.2f} s", flush=True)
            for round_no in range(1, repeat + 1):
                for kind, wanted in (("solution", "pass"), ("starter", "fail")):
                    await asyncio.to_thread(_learner.wait_idle, [server.process.pid])
                    base = await asyncio.to_thread(bare_torchrun, lesson2, 2)
                    bare.append(base)
                    base_load = os.getloadavg()[0]
                    code = _code(EXERCISE, kind)
                    saved = await http.put(
                        f"/api/v1/drafts/{EXERCISE}", json={"code": code}, headers=learner
                    )
                    saved.raise_for_status()
                    await asyncio.to_thread(_learner.wait_idle, [server.process.pid])
                    verdict = await _learner.submit_and_follow(http, learner, EXERCISE, code)
                    seconds = verdict.verdict_s
                    ok &= verdict.outcome == wanted and seconds is not None
                    if seconds is not None:
                        took[kind].append(seconds / base)
                    shown = "-" if seconds is None else f"{seconds:.2f} s = {seconds / base:.2f}x"
                    print(
                        f"  round {round_no} {kind}: bare torchrun {base:.2f} s (load "
                        f"{base_load:.2f}); verdict {verdict.outcome or verdict.status} in "
                        f"{shown} (load {os.getloadavg()[0]:.2f})",
                        flush=True,
                    )
    for kind, ratios in took.items():
        if ratios:
            print(f"{kind}: median {statistics.median(ratios):.2f}x a bare torchrun of lesson 2")
    return ok


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks hang_verdicts")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--pool", type=int, default=2)
    args = parser.parse_args(argv)
    return 0 if asyncio.run(_run(args.repeat, args.pool)) else 1
