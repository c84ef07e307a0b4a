"""Progress sync under 50 closed-loop clients on PostgreSQL, this code against a baseline checkout,
measured alternately in one run (issue 41).

    python -m benchmarks sync_load [--against=/tmp/i41-old-main] [--this=CHECKOUT] [--rounds=2]
                                   [--seconds=15]
                                   [--clients=50] [--learners=10] [--profile]
                                   [--pg=postgresql+psycopg://postgres@127.0.0.1:5432/postgres]

Each round serves each code in turn (`python -m app serve` in its own checkout, a fresh database
each, migrated by the served code), signs up `learners` learners with two devices each, and runs
`clients` clients (tabs spread over the devices) that sync 1-3 step events of one lesson as fast
as they get answers for `seconds` s: one hot lesson on one day, every learner on it, which is
the case where shared counter rows would queue everyone. Printed per run: p50/p99 of a sync,
syncs per second, the load average (1 min) before and after; for code with domain events, the
analytics lag sampled every 0.2 s during the load (the age of the oldest event not yet applied:
how old the instructor's figures are) and the time to drain the rest after the load.

`--against`: the baseline checkout (`git worktree add /tmp/i41-old-main 03426fc`; it runs with
this interpreter, so its dependencies must match); without one, this code alone. `--this`:
serve another checkout in place of this one (to profile an older revision).
`--profile`: serve through `benchmarks._timed_serve` and print where the database time of the
syncs went (per statement, lock waits included, and per phase of the sync).

Wanted (issue 41): p99 at most half the baseline's (03426fc), below 100 ms on 2 cores if the
machine is quiet; analytics lag p99 below 5 s. Figures are wall clock on a shared machine: read
them beside the load average.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from benchmarks.api_load import ROOT, STEPS, _option, fresh_database, served, sign_up

LESSON = "ddp-fundamentals"


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def _event(rng: random.Random) -> dict[str, object]:
    return {
        "id": uuid.uuid4().hex,
        "type": rng.choice(("step_seen", "position", "step_completed")),
        "lesson_id": LESSON,
        "step_id": rng.choice(STEPS),
        "at": "2026-12-07T10:00:00Z",
    }


def _p(latencies: list[float], q: float) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else 0.0


async def _lag_sampler(url: str, stop: asyncio.Event, lags: list[float]) -> None:
    engine = create_engine(url.replace("+psycopg", "+psycopg"))
    try:
        while not stop.is_set():
            with engine.connect() as conn:
                oldest = conn.execute(
                    text("SELECT extract(epoch FROM now() - min(recorded_at)) FROM domain_events")
                ).scalar()
            lags.append(float(oldest or 0.0))
            await asyncio.sleep(0.2)
    finally:
        engine.dispose()


def _has_events(url: str) -> bool:
    engine = create_engine(url)
    with engine.connect() as conn:
        found = conn.execute(text("SELECT to_regclass('domain_events') IS NOT NULL")).scalar()
    engine.dispose()
    return bool(found)


async def _drain_seconds(url: str, limit: float = 120.0) -> float:
    engine = create_engine(url)
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < limit:
            with engine.connect() as conn:
                if not conn.execute(text("SELECT count(*) FROM domain_events")).scalar():
                    break
            await asyncio.sleep(0.1)
    finally:
        engine.dispose()
    return time.perf_counter() - started


async def _run(
    base: str, url: str, clients: int, learners: int, seconds: float
) -> dict[str, float | str]:
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        devices = [await sign_up(http, f"load{i}@example.org", 2) for i in range(learners)]
    tabs = [devices[i % learners][(i // learners) % 2] for i in range(clients)]
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    events = _has_events(url)
    stop = asyncio.Event()
    lags: list[float] = []
    load_before = _load()
    deadline = time.perf_counter() + seconds

    async def client(headers: dict[str, str], http: httpx.AsyncClient) -> None:
        rng = random.Random()
        while time.perf_counter() < deadline:
            batch = [_event(rng) for _ in range(rng.randint(1, 3))]
            started = time.perf_counter()
            try:
                answer = await http.post(
                    "/api/v1/progress/events", json={"events": batch}, headers=headers
                )
                status = str(answer.status_code)
            except httpx.HTTPError:  # a connection the server dropped under the load
                status = "dropped"
            statuses[status] = statuses.get(status, 0) + 1
            latencies.append(time.perf_counter() - started)

    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    sampler = asyncio.create_task(_lag_sampler(url, stop, lags)) if events else None
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as http:
        await asyncio.gather(*(client(headers, http) for headers in tabs))
    stop.set()
    if sampler is not None:
        await sampler
    figures: dict[str, float | str] = {
        "syncs": len(latencies),
        "failed": len(latencies) - statuses.get("200", 0),
        "statuses": " ".join(f"{k}:{v}" for k, v in sorted(statuses.items())),
        "p50": statistics.median(latencies) * 1000 if latencies else 0.0,
        "p99": _p(latencies, 0.99),
        "per_s": len(latencies) / seconds,
        "load": f"{load_before} -> {_load()}",
    }
    if events:
        figures["lag_p99"] = _p(lags, 0.99) / 1000
        figures["lag_max"] = max(lags, default=0.0)
        figures["drain_s"] = await _drain_seconds(url)
    return figures


def _print_profile(path: Path, name: str) -> None:
    if not path.exists():
        print(f"  {name}: no profile written")
        return
    found = json.loads(path.read_text())
    total = sum(entry[1] for entry in found["statements"].values()) or 1.0
    print(f"  {name}: database time by statement (count, total s, share, worst ms):")
    ranked = sorted(found["statements"].items(), key=lambda item: -item[1][1])
    for statement, (count, seconds, worst) in ranked[:12]:
        print(
            f"    {int(count):6d} {seconds:8.2f} {seconds / total:6.1%} {worst * 1000:8.1f}  "
            f"{statement}"
        )
    print(f"  {name}: wall time by phase (count, total s, mean ms):")
    for phase, (count, seconds, _worst) in sorted(found["phases"].items(), key=lambda i: -i[1][1]):
        print(f"    {int(count):6d} {seconds:8.2f} {seconds / max(count, 1) * 1000:8.1f}  {phase}")


def _one(
    name: str, root: Path, admin: str, port: int, options: dict[str, float], profile: bool
) -> dict[str, float | str]:
    with fresh_database(admin) as url, tempfile.TemporaryDirectory() as scratch:
        profile_path = Path(scratch) / "profile.json"
        env = {"RDV_BENCH_PROFILE": str(profile_path)}
        command = [str(ROOT / "benchmarks" / "_timed_serve.py"), "serve"] if profile else None
        with served(url, port, extra_env=env, cwd=root, command=command) as base:
            figures = asyncio.run(
                _run(
                    base,
                    url,
                    int(options["clients"]),
                    int(options["learners"]),
                    options["seconds"],
                )
            )
        if profile:
            _print_profile(profile_path, name)
    return figures


def _line(name: str, figures: dict[str, float | str]) -> str:
    line = (
        f"{name:>9}: p50 {figures['p50']:7.1f} ms  p99 {figures['p99']:7.1f} ms  "
        f"{figures['per_s']:6.1f} syncs/s  ({figures['syncs']} syncs, {figures['failed']} "
        f"not 200: {figures['statuses']})  load {figures['load']}"
    )
    if "lag_p99" in figures:
        line += (
            f"  analytics lag p99 {figures['lag_p99']:.2f} s (max {figures['lag_max']:.2f} s, "
            f"drained {figures['drain_s']:.1f} s after)"
        )
    return line


def main(argv: list[str]) -> int:
    admin = _option(argv, "pg", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    against = _option(argv, "against", "/tmp/i41-old-main")
    options = {
        "seconds": float(_option(argv, "seconds", "15")),
        "clients": float(_option(argv, "clients", "50")),
        "learners": float(_option(argv, "learners", "10")),
    }
    rounds = int(_option(argv, "rounds", "2"))
    profile = "--profile" in argv
    port = int(_option(argv, "port", "8766"))
    codes = [("this", Path(_option(argv, "this", str(ROOT))))]
    if Path(against, "app").is_dir():
        codes.append(("baseline", Path(against)))
    else:
        print(f"no baseline checkout at {against}: this code alone")
    print(f"load average: {_load()} (1 min); {sys.executable}")
    results: dict[str, list[dict[str, float | str]]] = {name: [] for name, _ in codes}
    for round_ in range(rounds):
        order = codes if round_ % 2 == 0 else codes[::-1]
        for name, root in order:
            figures = _one(name, root, admin, port, options, profile)
            results[name].append(figures)
            print(_line(name, figures), flush=True)
    ok = all(not f["failed"] for runs in results.values() for f in runs)
    if "baseline" in results:
        mine = statistics.median(float(f["p99"]) for f in results["this"])
        theirs = statistics.median(float(f["p99"]) for f in results["baseline"])
        print(
            f"p99 median of rounds: this {mine:.1f} ms, baseline {theirs:.1f} ms: ratio "
            f"{mine / theirs:.2f} (wanted <= 0.5); load now {_load()}"
        )
    lags = [float(f["lag_p99"]) for f in results["this"] if "lag_p99" in f]
    if lags:
        print(f"analytics lag p99 (worst round): {max(lags):.2f} s (wanted < 5 s)")
    print("sync_load:", "ok" if ok else "FAILED (some syncs were not answered 200)")
    return 0 if ok else 1
