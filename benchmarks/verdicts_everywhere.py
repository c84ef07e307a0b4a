"""Verdicts wherever the grading runs, every figure of issue 26 in one run.

    python -m benchmarks verdicts_everywhere [--queued=20] [--workers=2] [--pool=K]
                                             [--exercises=all|ID,ID]

Three `api_verdicts` runs (real servers, the REST API, SQLite for the in-process executor,
PostgreSQL and procrastinate for the queue), one after the other, each with its own bare torchrun
baseline of the lesson-2 solution measured beside its gradings:

1. in-process, **no hint**: each exercise's solution pasted and submitted, the pool holding what
   the previous exercise's grading left (they follow one another), then `--queued` lesson-2
   solutions at once (time to the last verdict, CPU-seconds per graded submission with the
   pool's refills, none lost);
2. in-process, with the hint (the editor's draft saved first: the pool readies that exercise);
3. through the queue with `--workers` grader workers, no hint, then the same throughput run.

Then each figure against what the issue asks, the load average beside it: every exercise at most
1.2x the baseline without the hint (in-process and queue) and with it, lesson 2 at most 0.3x with
it, the queued submissions in at most 60 s with nothing lost, and the idle pool's memory.
Exit status 0 when every solution passed and nothing was lost (the targets are reported, not
enforced: a loaded machine stretches every figure).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from benchmarks import api_verdicts
from benchmarks.api_verdicts import LESSON2, Bench, Options
from grader.sandbox.pool_plan import pool_size

EVERY_EXERCISE = 1.2  # at most this times the baseline, hint or not
LESSON2_HINTED = 0.3
QUEUED_WITHIN_S = 60.0


def worst(bench: Bench) -> tuple[str, float, float]:
    """(exercise, ratio, load) of the slowest verdict against the run's own baseline."""
    base = statistics.median(bench.bare)
    found = ("-", 0.0, 0.0)
    for (exercise, _index), measured in bench.runs.items():
        known = [v.verdict_s for v in measured.verdicts if v.verdict_s is not None]
        if not known:
            return exercise, float("inf"), statistics.median(measured.loads)
        ratio = statistics.median(known) / base
        if ratio > found[1]:
            found = (exercise, ratio, statistics.median(measured.loads))
    return found


def lesson2(bench: Bench) -> tuple[float, float]:
    base = statistics.median(bench.bare)
    measured = bench.runs[(LESSON2, 0)]
    known = [v.verdict_s for v in measured.verdicts if v.verdict_s is not None]
    return (statistics.median(known) / base if known else float("inf")), statistics.median(
        measured.loads
    )


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks verdicts_everywhere")
    parser.add_argument("--queued", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pool", type=int, default=None, help="default: the grader's own")
    parser.add_argument("--exercises", default="all")
    args = parser.parse_args(argv)
    size = pool_size() if args.pool is None else args.pool
    wanted = () if args.exercises == "all" else tuple(args.exercises.split(","))
    runs = {
        "in-process, no hint": Options(1, args.queued, (size,), wanted, None, False, 0),
        "in-process, hint": Options(1, 0, (size,), wanted, None, True, 0),
        f"queue, {args.workers} workers, no hint": Options(
            1, args.queued, (size,), wanted, None, False, args.workers
        ),
    }
    benches: dict[str, Bench] = {}
    for label, opts in runs.items():
        print(f"\n=== {label} (pool of {size} per grading process)", flush=True)
        benches[label] = asyncio.run(api_verdicts.run(opts))
    print("\n=== issue 26: each figure against its target (ratios to each run's own baseline)")
    ok = True
    for label, bench in benches.items():
        ok = ok and bench.ok
        base = statistics.median(bench.bare)
        exercise, ratio, at = worst(bench)
        print(
            f"{label}: baseline {base:.2f} s; slowest {exercise} {ratio:.2f}x (load {at:.2f}), "
            f"every exercise <= {EVERY_EXERCISE}x: {verdict(ratio <= EVERY_EXERCISE)}"
        )
        if (LESSON2, 0) in bench.runs:
            l2, l2_load = lesson2(bench)
            line = f"  lesson 2 {l2:.2f}x (load {l2_load:.2f})"
            if bench.opts.hint:
                line += f", <= {LESSON2_HINTED}x with the hint: {verdict(l2 <= LESSON2_HINTED)}"
            print(line)
        if bench.throughput is not None:
            total, cpu, lost, tp_load = bench.throughput
            print(
                f"  {bench.opts.queued} queued lesson-2 solutions: {total:.1f} s to the last "
                f"verdict (load {tp_load:.2f}), {lost} lost, {cpu:.2f} CPU-s per grading; <= "
                f"{QUEUED_WITHIN_S:.0f} s, none lost: "
                f"{verdict(total <= QUEUED_WITHIN_S and lost == 0)}"
            )
        if bench.idle_pss_mib is not None:
            print(
                f"  idle memory under the server and its workers: PSS {bench.idle_pss_mib:.0f} MiB"
            )
    print("verdicts_everywhere:", "ok" if ok else "FAILED (a solution did not pass, or one lost)")
    return 0 if ok else 1
