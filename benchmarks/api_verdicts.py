"""Issue 15's speed figures through the API, as a learner gets them, every figure in one run.

    python -m benchmarks api_verdicts [--repeat=1] [--queued=20] [--pool=both|K] [--size=2]
                                      [--exercises=all|ID,ID] [--concurrency=N] [--no-hint]
                                      [--workers=N]

1. The baseline: a bare `torchrun --standalone --nproc-per-node 2` of the lesson-2 solution,
   run once before every timed submission round, alternating with them so load hits both alike.
2. Real servers (`python -m app serve`, SQLite in a temp dir, the in-process executor, the bwrap
   sandbox, as `make run` serves): with `--pool=both` one cold (RDV_WARM_POOL=0) and one warm
   (RDV_WARM_POOL=size), running side by side and used in turn; `--pool=K` serves only K. A
   learner registers and signs in through the REST API the mobile app uses, saves each graded
   exercise's shipped solution as a draft (the editor does while they type; the server then
   readies that exercise's launches), submits it and follows its live events: seconds from the
   POST to the first rank output line and to the verdict, each as a ratio to the bare torchrun.
   With `--no-hint` the draft is not saved first: the pool holds what the previous exercise's
   grading left (each exercise follows another), as for a learner who pastes and submits.
   With `--workers=N` each server grades as the scale stack does instead: PostgreSQL, the
   procrastinate queue and N `python -m grader.worker` processes, each with its own warm pool.
   Before every timed
   run the benchmark waits until nothing under any server starts, ends or uses CPU (the pools
   are full and idle), and says how long it waited.
3. The idle pool's memory: the processes under each idle server, from /proc (the server does not
   report its pool).
4. Throughput: `--queued` lesson-2 solutions posted at once by several learners (per-learner cap
   `max_submissions_in_flight`) to the last server (warm with --pool=both): the time to the last
   verdict against (queued x one verdict) / cores; every submission must reach a verdict.

Each figure is printed with the 1-minute load average when it was taken.
Exit status 0 when every shipped solution passed and nothing was lost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import statistics
import time
from dataclasses import dataclass, field

import httpx

from benchmarks import _learner
from benchmarks._learner import Server, Verdict
from benchmarks.grading_latency import bare_torchrun
from grader.exercises import exercise_dir, graded_exercises

LESSON2 = "ddp-fundamentals/train"
DEFAULT_WARM_SIZE = 2
ISSUE_TARGET = 0.5  # issue 15: the lesson-2 verdict through the API <= 0.5x a bare torchrun


@dataclass(frozen=True)
class Options:
    repeat: int
    queued: int
    pools: tuple[int, ...]  # RDV_WARM_POOL of each server, in the order they are used
    exercises: tuple[str, ...]  # empty: every graded exercise
    concurrency: int | None  # RDV_GRADING_CONCURRENCY; None: the server's default
    hint: bool = True  # save the draft before submitting (the pool readies that exercise)
    workers: int = 0  # grader workers on the queue; 0: the in-process executor


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return number


def parse_args(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser(prog="python -m benchmarks api_verdicts")
    parser.add_argument("--repeat", type=_positive, default=1)
    parser.add_argument("--queued", type=int, default=20, help="0: no throughput run")
    parser.add_argument("--pool", default="both", help="both (cold and warm) or a pool size K")
    parser.add_argument("--size", type=_positive, default=DEFAULT_WARM_SIZE, help="warm size")
    parser.add_argument("--exercises", default="all", help="all, or ids separated by commas")
    parser.add_argument("--concurrency", type=_positive, default=None)
    parser.add_argument("--no-hint", action="store_true", help="submit without saving a draft")
    parser.add_argument("--workers", type=int, default=0, help="queue workers; 0: in-process")
    args = parser.parse_args(argv)
    if args.pool == "both":
        pools: tuple[int, ...] = (0, args.size)
    elif args.pool.isdigit():
        pools = (int(args.pool),)
    else:
        parser.error(f"--pool={args.pool}: want 'both' or a pool size (0: cold)")
    if args.queued < 0:
        parser.error("--queued must be 0 or more")
    wanted = () if args.exercises == "all" else tuple(args.exercises.split(","))
    return Options(
        args.repeat, args.queued, pools, wanted, args.concurrency, not args.no_hint, args.workers
    )


def pool_label(size: int) -> str:
    return "cold" if size == 0 else f"warm K={size}"


def ratio(seconds: float | None, base: float) -> str:
    """`seconds / base` as "1.23x"; "-" when there is no figure."""
    if seconds is None or base <= 0:
        return "-"
    return f"{seconds / base:.2f}x"


def figure(seconds: float | None, base: float, load: float) -> str:
    """A measured time, its ratio to the baseline and the load average beside it."""
    if seconds is None:
        return f"     - s     -   (load {load:.2f})"
    return f"{seconds:6.2f} s {ratio(seconds, base):>6} (load {load:.2f})"


def load() -> float:
    return os.getloadavg()[0]


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def solution(exercise: str) -> str:
    folder = exercise_dir(exercise)
    if folder is None or not (folder / "solution.py").is_file():
        raise SystemExit(f"{exercise} has no shipped solution.py")
    return (folder / "solution.py").read_text()


@dataclass
class Measured:
    verdicts: list[Verdict] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)


@dataclass
class Bench:
    opts: Options
    servers: list[Server]
    http: list[httpx.AsyncClient]
    learners: list[dict[str, str]]
    bare: list[float] = field(default_factory=list)
    bare_loads: list[float] = field(default_factory=list)
    runs: dict[tuple[str, int], Measured] = field(default_factory=dict)
    ok: bool = True
    # The throughput run's figures: seconds to the last verdict, CPU-s per grading, lost, load.
    throughput: tuple[float, float, int, float] | None = None
    idle_pss_mib: float | None = None

    def roots(self) -> list[int]:
        return [pid for server in self.servers for pid in server.pids]

    async def idle(self) -> float:
        return await asyncio.to_thread(_learner.wait_idle, self.roots())

    async def baseline(self, code: str) -> float:
        await self.idle()
        seconds = await asyncio.to_thread(bare_torchrun, code, 2)
        self.bare.append(seconds)
        self.bare_loads.append(load())
        return seconds

    async def timed(self, index: int, exercise: str, code: str) -> tuple[Verdict, float]:
        # The editor saves the learner's draft while they write (PUT /drafts/...): the server
        # learns which exercise is coming and its pool readies that exercise's launches.
        if self.opts.hint:
            saved = await self.http[index].put(
                f"/api/v1/drafts/{exercise}", json={"code": code}, headers=self.learners[index]
            )
            saved.raise_for_status()
        waited = await self.idle()
        verdict = await _learner.submit_and_follow(
            self.http[index], self.learners[index], exercise, code
        )
        measured = self.runs.setdefault((exercise, index), Measured())
        measured.verdicts.append(verdict)
        measured.loads.append(load())
        if verdict.outcome != "pass":
            self.ok = False
        return verdict, waited


async def run_rounds(bench: Bench, exercises: list[str]) -> None:
    lesson2 = solution(LESSON2)
    for round_no in range(1, bench.opts.repeat + 1):
        for exercise in exercises:
            code = solution(exercise)
            bare = await bench.baseline(lesson2)
            parts = [f"bare {bare:.2f} s (load {bench.bare_loads[-1]:.2f})"]
            for index, server in enumerate(bench.servers):
                verdict, waited = await bench.timed(index, exercise, code)
                idle = "not idle after 300 s" if waited < 0 else f"idle after {waited:.1f} s"
                first = "-" if verdict.first_output_s is None else f"{verdict.first_output_s:.2f}"
                took = "-" if verdict.verdict_s is None else f"{verdict.verdict_s:.2f}"
                parts.append(
                    f"{server.label} [{idle}]: first output {first} s, verdict {took} s "
                    f"{verdict.outcome or verdict.status} (load {load():.2f})"
                )
            print(f"  round {round_no} {exercise}: " + " | ".join(parts), flush=True)


def summarize(bench: Bench, exercises: list[str]) -> float:
    base = statistics.median(bench.bare)
    print(
        f"\nbaseline: bare torchrun of the lesson-2 solution, 2 ranks, median of "
        f"{len(bench.bare)}: {base:.2f} s (runs {', '.join(f'{s:.2f}' for s in bench.bare)}; "
        f"load {min(bench.bare_loads):.2f}-{max(bench.bare_loads):.2f})"
    )
    print("POST to verdict, and POST to the first rank output line, through the API:")
    for exercise in exercises:
        cells = []
        for index, server in enumerate(bench.servers):
            measured = bench.runs[(exercise, index)]
            verdict = median([v.verdict_s for v in measured.verdicts])
            first = median([v.first_output_s for v in measured.verdicts])
            at = statistics.median(measured.loads)
            cells.append(
                f"{server.label}: {figure(verdict, base, at)}, first output "
                f"{'-' if first is None else f'{first:.2f} s'}"
            )
        print(f"  {exercise:42} " + " | ".join(cells))
    for index, server in enumerate(bench.servers):
        if (LESSON2, index) not in bench.runs:
            continue
        measured = bench.runs[(LESSON2, index)]
        verdict = median([v.verdict_s for v in measured.verdicts])
        met = verdict is not None and verdict / base <= ISSUE_TARGET
        print(
            f"lesson 2 ({LESSON2}) verdict through the API, {server.label}: "
            f"{figure(verdict, base, statistics.median(measured.loads))}; issue 15 asks "
            f"<= {ISSUE_TARGET}x: {'met' if met else 'NOT met'}"
        )
    return base


async def idle_memory(bench: Bench) -> None:
    waited = await bench.idle()
    print(f"idle servers (waited {waited:.1f} s for every process under them to be idle):")
    for server in bench.servers:
        mem = _learner.tree_memory(server.process.pid)
        for worker in server.workers:
            mem = mem + _learner.tree_memory(worker.pid)
        pss = "unreadable" if mem.pss_mib is None else f"{mem.pss_mib:.0f} MiB"
        bench.idle_pss_mib = mem.pss_mib
        print(
            f"  {server.label}: {mem.processes} processes under the server "
            f"{dict(sorted(mem.names.items()))}, RSS {mem.rss_mib:.0f}"
            f" MiB (shared pages in each), PSS {pss} (load {load():.2f})"
        )


async def throughput(bench: Bench, single: float | None) -> None:
    from app.config import Settings

    queued = bench.opts.queued
    index = len(bench.servers) - 1
    server, http = bench.servers[index], bench.http[index]
    cap = Settings().max_submissions_in_flight
    learners = [
        await _learner.sign_up(http, f"queue{i}@example.org")
        for i in range(math.ceil(queued / cap))
    ]
    code = solution(LESSON2)
    await bench.idle()
    roots = server.pids
    cpu_before = _learner.trees_cpu_s(roots)
    start = time.perf_counter()
    verdicts = await asyncio.gather(
        *(
            _learner.submit_and_follow(http, learners[i // cap], LESSON2, code)
            for i in range(queued)
        )
    )
    total = time.perf_counter() - start
    at = load()
    refilled = await bench.idle()  # the pool's refills after the last grading, counted in
    cpu = (_learner.trees_cpu_s(roots) - cpu_before) / max(1, queued)
    reached = [v for v in verdicts if v.verdict_s is not None]
    stored = 0
    for i, verdict in enumerate(verdicts):
        if verdict.submission is None:
            continue
        row = await http.get(
            f"/api/v1/submissions/{verdict.submission}", headers=learners[i // cap]
        )
        if row.status_code == 200 and row.json().get("result") is not None:
            stored += 1
    outcomes: dict[str, int] = {}
    for verdict in verdicts:
        key = verdict.outcome or verdict.status
        outcomes[key] = outcomes.get(key, 0) + 1
    cores = os.cpu_count() or 1
    lost = queued - len(reached)
    print(
        f"throughput, {server.label}: {queued} lesson-2 solutions posted at once by "
        f"{len(learners)} learners (cap {cap} in flight each): last verdict after {total:.1f} s "
        f"(load {at:.2f})"
    )
    bound = queued * cpu / cores
    bench.throughput = (total, cpu, queued - len(reached), at)
    print(
        f"  CPU per graded submission (server{' and workers' if server.workers else ''}, every "
        f"process under them, the pool's refills included, idle again {refilled:.1f} s after): "
        f"{cpu:.2f} CPU-s; {queued} x that / {cores} cores = {bound:.1f} s, the CPU-seconds bound: "
        f"the last verdict came at {total / bound if bound else 0:.2f}x it"
    )
    if single is not None:
        ideal = queued * single / cores
        print(
            f"  against {queued} x {single:.2f} s (one verdict, {server.label}) / {cores} cores "
            f"= {ideal:.1f} s: {total / ideal:.2f}x"
        )
    print(
        f"  verdicts on the stream: {len(reached)}/{queued} {dict(sorted(outcomes.items()))}; "
        f"results stored (GET /submissions/{{id}}): {stored}/{queued}; lost: {lost}"
    )
    if lost or stored != queued or outcomes.get("pass", 0) != queued:
        bench.ok = False


async def run(opts: Options) -> Bench:
    exercises = list(opts.exercises) or graded_exercises()
    cores = os.cpu_count() or 1
    extra = {} if opts.concurrency is None else {"RDV_GRADING_CONCURRENCY": str(opts.concurrency)}
    print(
        f"api_verdicts: {len(exercises)} exercises, n={opts.repeat}, servers "
        f"{[pool_label(p) for p in opts.pools]}, grading concurrency "
        f"{opts.concurrency or 'the server default'}, "
        f"{'draft saved first (hint)' if opts.hint else 'no hint (pool left by the last exercise)'}"
        f", {f'{opts.workers} queue workers' if opts.workers else 'in-process executor'}"
        f", {cores} cores (load {load():.2f})",
        flush=True,
    )
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(
                _learner.served(
                    pool_label(p), {"RDV_WARM_POOL": str(p), **extra}, queue_workers=opts.workers
                )
            )
            for p in opts.pools
        ]
        async with contextlib.AsyncExitStack() as clients:
            http = [
                await clients.enter_async_context(
                    httpx.AsyncClient(base_url=s.base, timeout=httpx.Timeout(600, connect=30))
                )
                for s in servers
            ]
            learners = [await _learner.sign_up(h, "learner@example.org") for h in http]
            bench = Bench(opts, servers, http, learners)
            lesson2 = solution(LESSON2)
            for index, server in enumerate(servers):  # the first grading of a fresh process
                verdict = await _learner.submit_and_follow(
                    http[index], learners[index], LESSON2, lesson2
                )
                print(
                    f"  {server.label}: a first submission, untimed: "
                    f"{verdict.verdict_s or 0:.2f} s "
                    f"{verdict.outcome or verdict.status} (load {load():.2f})",
                    flush=True,
                )
            await run_rounds(bench, exercises)
            base = summarize(bench, exercises)
            await idle_memory(bench)
            if opts.queued > 0:
                single = None
                if (LESSON2, len(servers) - 1) in bench.runs:
                    last = bench.runs[(LESSON2, len(servers) - 1)].verdicts
                    single = median([v.verdict_s for v in last])
                await throughput(bench, single)
            print(f"baseline for the ratios: {base:.2f} s; load at the end {load():.2f}")
    return bench


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    ok = asyncio.run(run(opts)).ok
    print("api_verdicts:", "ok" if ok else "FAILED (a solution did not pass, or one was lost)")
    return 0 if ok else 1
