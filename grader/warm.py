"""The warm pool: sandboxes started ahead of their launch, one launch each.

Every process that grades (the app's in-process executor, `python -m grader.worker`, the CLI)
keeps up to K sandboxes (`grader.sandbox.bwrap_warm.WarmBwrap` for bwrap,
`grader.sandbox.docker_warm.WarmDocker` for docker) running the supervisor with torch and the
harness imported, waiting for a job. `run_warm` hands a launch to one of them; the
sandbox is destroyed after it, and a long-lived thread starts the next one in the background (in a
one-shot CLI, while the current launch runs). No pool, an empty pool or a warm sandbox that died
returns None: the launcher then starts a cold sandbox, as it does with RDV_WARM_POOL=0.

Settings: RDV_WARM_POOL=K (0: off; default from cores and memory, `default_size`),
RDV_WARM_IDLE_S (how long an unused sandbox waits before it is replaced; default 600).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from grader.contract import Limits
from grader.sandbox.base import OutputCallback, SandboxOutcome, SandboxRequest
from grader.sandbox.bwrap_warm import WarmBwrap
from grader.sandbox.warm_output import WarmSink

log = logging.getLogger(__name__)

POOL_ENV = "RDV_WARM_POOL"
IDLE_ENV = "RDV_WARM_IDLE_S"
DEFAULT_IDLE_S = 600.0
# A sandbox this close to its idle deadline is not handed out (the job could arrive too late).
EXPIRY_MARGIN_S = 60.0
# How long a launch waits for a sandbox the pool is starting before it starts a cold one.
WAIT_FOR_STARTING_S = 120.0
# Memory an idle warm sandbox holds (the supervisor and 2 spare ranks, torch imported in each;
# measured 1870 MiB for 3 sandboxes of 2, 3 and 1 spares), for the default size.
IDLE_MIB = 700
# Variables the supervisor sets from the job's config (so they do not split the pool).
LATE_ENV = ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE",)
# The log line of every launch a warm sandbox served (`make scale-test` counts them).
SERVED_LOG = "a warm sandbox served a launch: %s"
# Limits the supervisor or the host apply per launch (the rest are fixed when a sandbox starts).
LATE_LIMITS = ("wall_seconds", "output_bytes_per_rank", "pg_timeout_seconds")


# Below this many cores the pool refills between gradings, not during one (starting a sandbox,
# three interpreters importing torch, would take the cores from the launch it should speed up).
SMALL_MACHINE_CORES = 4
# Most launches one grading makes (env-launch: three world sizes and a 2-node job).
MAX_PLAN = 4


def _available_mib() -> int:
    """MemAvailable of /proc/meminfo, in MiB (0: unknown)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


def default_size() -> int:
    """One warm sandbox per core, at least 2 (a grading's next launch is ready while one runs)
    and at most MAX_PLAN, within a quarter of the free memory."""
    cores = os.cpu_count() or 1
    avail_mib = _available_mib()
    by_memory = avail_mib // (4 * IDLE_MIB) if avail_mib else 2
    return max(0, min(max(2, cores), MAX_PLAN, by_memory))


def pool_size() -> int:
    value = os.environ.get(POOL_ENV, "").strip()
    if value:
        try:
            return max(0, int(value))
        except ValueError:
            log.warning("%s=%r is not a number; using the default", POOL_ENV, value)
    return default_size()


# The backend a warm sandbox is made by: ("bwrap",) or ("docker", image, user).
Backend = tuple[str, ...]
BWRAP: Backend = ("bwrap",)


def warm_backend(sandbox: Any) -> Backend | None:
    """The warm backend for launches in `sandbox` (a grader.sandbox backend); None: no pool
    serves it (the "none" backend)."""
    if sandbox.name == "bwrap":
        return BWRAP
    if sandbox.name == "docker":
        return ("docker", str(sandbox.image), str(sandbox.user))
    return None


class WarmSandbox(Protocol):
    """What the pool needs of a pre-started single-use sandbox (WarmBwrap, WarmDocker)."""

    sink: WarmSink

    def start(self) -> None: ...
    def alive(self) -> bool: ...
    def ready(self) -> bool: ...
    def wait_ready(self, timeout_s: float) -> bool: ...
    def expires_in(self) -> float: ...
    @property
    def ident(self) -> str: ...
    def run(
        self, req: SandboxRequest, config_name: str, on_output: OutputCallback | None = None
    ) -> SandboxOutcome | None: ...
    def destroy(self) -> None: ...


@dataclass(frozen=True)
class WarmKey:
    """What a sandbox is started with: launches with the same key can use it."""

    limits: str
    gpus: tuple[int, ...]
    env: tuple[tuple[str, str], ...]
    backend: Backend = BWRAP
    # Spare interpreters started with the supervisor (inside/spares.py): `ranks` per node, and for
    # a simulated job of several `nodes` an agent per node.
    ranks: int = 0
    nodes: int = 1

    @classmethod
    def for_request(
        cls, req: SandboxRequest, backend: Backend = BWRAP, ranks: int = 0, nodes: int = 1
    ) -> WarmKey:
        fixed = req.limits.model_dump(exclude=set(LATE_LIMITS))
        env = tuple(sorted((k, v) for k, v in req.env.items() if k not in LATE_ENV))
        return cls(json.dumps(fixed, sort_keys=True), tuple(req.gpus), env, backend, ranks, nodes)

    def limits_for_start(self) -> Limits:
        return Limits(**json.loads(self.limits))


def make_sandbox(key: WarmKey, idle_s: float, bwrap: str) -> WarmSandbox:
    """A warm sandbox of `key`'s backend, not started yet."""
    limits, gpus, env = key.limits_for_start(), list(key.gpus), dict(key.env)
    if key.backend[0] == "docker":
        from grader.sandbox.docker_warm import WarmDocker

        _name, image, user = key.backend
        return WarmDocker(limits, gpus, env, idle_s, image, user, spares=key.ranks, nodes=key.nodes)
    return WarmBwrap(limits, gpus, env, idle_s, bwrap, spares=key.ranks, nodes=key.nodes)


@dataclass
class PoolStats:
    started: int = 0
    served: int = 0  # launches a warm sandbox ran
    cold: int = 0  # launches that found none (or a dead one) and started cold
    failed_starts: int = 0
    by_key: dict[WarmKey, int] = field(default_factory=dict)


class WarmPool:
    def __init__(
        self,
        size: int,
        *,
        idle_s: float = DEFAULT_IDLE_S,
        bwrap: str | None = None,
        refill: bool = True,  # False: no refill thread (tests of the planning alone)
    ):
        self.size = size
        self.idle_s = idle_s
        self.bwrap = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        self.cond = threading.Condition()
        self.idle: list[tuple[WarmKey, WarmSandbox]] = []
        self.starting: WarmKey | None = None
        # The launches this process is making, in order (one grading's plan): the pool keeps the
        # next `size` of them ready, cycling.
        self.plan: list[WarmKey] = []
        self.position = 0  # launches of the plan the current grading has made
        self.requested: WarmKey | None = None
        self.busy = 0  # launches running in a sandbox of this pool
        self.closed = False
        self.stats = PoolStats()
        self.backoff_until = 0.0
        self.thread = threading.Thread(target=self._refill, name="warm-pool", daemon=True)
        if refill:
            self.thread.start()

    # -- the launches' side ---------------------------------------------------------------
    def want(self, keys: list[WarmKey]) -> None:
        """Keep sandboxes ready for these launches (a grading's, in the order it makes them)."""
        with self.cond:
            if keys and keys != self.plan:
                self.plan = list(keys)
                self.position = 0
                self.cond.notify_all()

    def acquire(self, key: WarmKey, wait_s: float = WAIT_FOR_STARTING_S) -> WarmSandbox | None:
        deadline = time.monotonic() + wait_s
        with self.cond:
            if key not in self.plan:
                self.plan, self.position = [key], 0
            self.position += 1
            self.requested = key
            self.cond.notify_all()
            while not self.closed:
                for i, (k, sandbox) in enumerate(self.idle):
                    if k == key and sandbox.ready() and sandbox.expires_in() > EXPIRY_MARGIN_S:
                        del self.idle[i]
                        self.stats.served += 1
                        self.busy += 1
                        if self.requested == key:
                            self.requested = None
                        self.cond.notify_all()
                        return sandbox
                # One of `key` is starting, or the refill thread is about to start one.
                pending = (
                    self.starting == key
                    or any(k == key and s.alive() and not s.ready() for k, s in self.idle)
                    or (self.requested == key and time.monotonic() >= self.backoff_until)
                )
                left = deadline - time.monotonic()
                if not pending or left <= 0:
                    break
                self.cond.wait(min(left, 0.2))
            if self.requested == key:
                self.requested = None
            self.stats.cold += 1
            return None

    def release(self) -> None:
        """A launch that acquired a sandbox is over."""
        with self.cond:
            self.busy = max(0, self.busy - 1)
            self.cond.notify_all()

    def wait_idle_ready(self, timeout_s: float) -> bool:
        """Wait until the pool holds `size` ready sandboxes of its plan (benchmarks, tests)."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while time.monotonic() < deadline and not self.closed:
                if self.plan and not self._missing() and all(s.ready() for _k, s in self.idle):
                    return True
                self.cond.wait(0.2)
        return False

    def close(self) -> None:
        with self.cond:
            self.closed = True
            idle, self.idle = self.idle, []
            self.cond.notify_all()
        for _key, sandbox in idle:
            with contextlib.suppress(Exception):
                sandbox.destroy()

    def counts(self) -> dict[str, int]:
        with self.cond:
            ready = sum(1 for _k, s in self.idle if s.ready())
            return {"idle": len(self.idle), "ready": ready, "size": self.size}

    def idle_pids(self) -> list[int]:
        with self.cond:
            idle = [s for _k, s in self.idle if isinstance(s, WarmBwrap) and s.alive()]
            return [s.proc.pid for s in idle if s.proc is not None]

    # -- the refill thread (it also owns every sandbox's bwrap: --die-with-parent) ---------
    def _desired(self) -> list[WarmKey]:
        """The keys the idle pool should hold: the plan's next `size` launches, cycling."""
        if not self.plan:
            return []
        return [self.plan[i % len(self.plan)] for i in range(self.size)]

    def _missing(self) -> list[WarmKey]:
        """Desired keys the idle pool lacks, in plan order."""
        have = [k for k, _s in self.idle]
        missing = []
        for key in self._desired():
            if key in have:
                have.remove(key)
            else:
                missing.append(key)
        return missing

    def _next_key(self) -> tuple[WarmKey | None, list[WarmSandbox]]:
        """The key to start a sandbox for now (None: none), and idle sandboxes to drop for its
        room. A launch waiting comes first; else the plan, but on a small machine during a
        grading only what that grading still needs (a sandbox for later gradings would take the
        cores from its launches)."""
        stale: list[WarmSandbox] = []
        if self.requested is not None:
            key: WarmKey | None = self.requested
        elif self.busy and (os.cpu_count() or 1) < SMALL_MACHINE_CORES:
            have = [k for k, _s in self.idle]
            key = None
            for wanted in self.plan[self.position :]:
                if wanted not in have:
                    key = wanted
                    break
                have.remove(wanted)
        else:
            missing = self._missing()
            key = missing[0] if missing else None
        if key is None or time.monotonic() < self.backoff_until:
            return None, stale
        # Room for it: drop idle ones the plan does not want (or holds too many of).
        surplus = [k for k, _s in self.idle]
        for wanted in self._desired():
            if wanted in surplus:
                surplus.remove(wanted)
        while len(self.idle) >= self.size:
            victim = next((i for i, (k, _s) in enumerate(self.idle) if k in surplus), None)
            if victim is None and key == self.requested:
                victim = next((i for i, (k, _s) in enumerate(self.idle) if k != key), None)
            if victim is None:
                return None, stale
            victim_key, sandbox = self.idle.pop(victim)
            if victim_key in surplus:
                surplus.remove(victim_key)
            stale.append(sandbox)
        return key, stale

    def _refill(self) -> None:
        while True:
            with self.cond:
                self.cond.wait(0.5)
                if self.closed:
                    return
                stale = self._prune()
                key, dropped = self._next_key()
                stale += dropped
                if key is not None:
                    self.starting = key
                    if self.requested == key:
                        self.requested = None
            for sandbox in stale:
                with contextlib.suppress(Exception):
                    sandbox.destroy()
            if key is not None:
                self._start_one(key)

    def _prune(self) -> list[WarmSandbox]:
        """Idle sandboxes that died or are about to expire, taken out of the pool."""
        keep, gone = [], []
        for k, s in self.idle:
            alive = s.alive()
            if alive and s.expires_in() > EXPIRY_MARGIN_S:
                keep.append((k, s))
            else:
                if not alive and not s.ready():
                    log.warning("a warm sandbox died before it was ready: %s", s.sink.before[-5:])
                gone.append(s)
        self.idle = keep
        return gone

    def _start_one(self, key: WarmKey) -> None:
        sandbox = make_sandbox(key, self.idle_s, self.bwrap)
        try:
            sandbox.start()
        except Exception:
            log.exception("could not start a warm sandbox; launches start cold for a while")
            with self.cond:
                self.starting = None
                self.stats.failed_starts += 1
                self.backoff_until = time.monotonic() + 30
                self.cond.notify_all()
            return
        with self.cond:
            self.starting = None
            if self.closed:
                closed = True
            else:
                closed = False
                self.idle.append((key, sandbox))
                self.stats.started += 1
            self.cond.notify_all()
        if closed:
            sandbox.destroy()
            return
        if not sandbox.wait_ready(WAIT_FOR_STARTING_S):
            with self.cond:
                self.stats.failed_starts += 1
                if self.stats.failed_starts >= 3 and self.stats.served == 0:
                    self.backoff_until = time.monotonic() + 60
                self.cond.notify_all()


_POOL: WarmPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool() -> WarmPool | None:
    """This process's pool, started on first use; None when RDV_WARM_POOL=0."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.closed:
            size = pool_size()
            if size <= 0:
                return None
            idle = float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S))
            _POOL = WarmPool(size, idle_s=idle)
            atexit.register(_POOL.close)
        return _POOL


def close_pool() -> None:
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None:
        pool.close()


def run_warm(
    req: SandboxRequest,
    config_name: str,
    on_output: OutputCallback | None,
    backend: Backend = BWRAP,
    spares: tuple[int, int] = (0, 1),
) -> SandboxOutcome | None:
    """Run the supervisor launch `req` in a warm sandbox (`spares`: spare ranks per node, nodes;
    see WarmKey); None: none could take it (the caller starts a cold one)."""
    pool = get_pool()
    if pool is None:
        return None
    key = WarmKey.for_request(req, backend, *spares)
    sandbox = pool.acquire(key)
    if sandbox is None:
        log.info("no warm %s sandbox ready: a cold start", backend[0])
        return None
    try:
        outcome = sandbox.run(req, config_name, on_output)
    finally:
        sandbox.destroy()
        pool.release()
    if outcome is None:
        with pool.cond:
            pool.stats.served -= 1
            pool.stats.cold += 1
    else:
        log.info(SERVED_LOG, sandbox.ident)
    return outcome


@contextlib.contextmanager
def grading() -> Iterator[None]:
    """Around one grading's launches: on a small machine the pool refills after it, not between
    its launches (a refill takes the cores the next launch needs)."""
    pool = get_pool()
    if pool is None:
        yield
        return
    with pool.cond:
        pool.busy += 1
        pool.position = 0
    try:
        yield
    finally:
        pool.release()


def prewarm(plan: list[tuple[SandboxRequest, tuple[int, int]]], backend: Backend = BWRAP) -> None:
    """Start warming sandboxes of `backend` for these launches, (request, spares as in
    run_warm) each, in order."""
    pool = get_pool()
    if pool is not None:
        pool.want([WarmKey.for_request(req, backend, *spares) for req, spares in plan])
