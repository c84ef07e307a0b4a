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
# Memory an idle warm sandbox holds (the supervisor with torch imported), for the default size.
IDLE_MIB = 600
# Variables the supervisor sets from the job's config (so they do not split the pool).
LATE_ENV = ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE",)
# The log line of every launch a warm sandbox served (`make scale-test` counts them).
SERVED_LOG = "a warm sandbox served a launch: %s"
# Limits the supervisor or the host apply per launch (the rest are fixed when a sandbox starts).
LATE_LIMITS = ("wall_seconds", "output_bytes_per_rank", "pg_timeout_seconds")


# Below this many cores the pool is off by default: with the ranks still spawned (see README),
# starting their interpreters is most of a launch, and refilling the pool takes the cores from
# the launch it should speed up (measured on 2 cores: warm 0.97-1.8x of cold, no gain).
MIN_CORES_FOR_DEFAULT = 4


def default_size() -> int:
    """Off on machines under MIN_CORES_FOR_DEFAULT cores; else one warm sandbox per core, at
    most 4, and no more than a quarter of the free memory."""
    cores = os.cpu_count() or 1
    if cores < MIN_CORES_FOR_DEFAULT:
        return 0
    avail_mib = 0
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                avail_mib = int(line.split()[1]) // 1024
    by_memory = avail_mib // (4 * IDLE_MIB) if avail_mib else 1
    return max(1, min(cores, 4, by_memory))


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

    @classmethod
    def for_request(cls, req: SandboxRequest, backend: Backend = BWRAP) -> WarmKey:
        fixed = req.limits.model_dump(exclude=set(LATE_LIMITS))
        env = tuple(sorted((k, v) for k, v in req.env.items() if k not in LATE_ENV))
        return cls(json.dumps(fixed, sort_keys=True), tuple(req.gpus), env, backend)

    def limits_for_start(self) -> Limits:
        return Limits(**json.loads(self.limits))


def make_sandbox(key: WarmKey, idle_s: float, bwrap: str) -> WarmSandbox:
    """A warm sandbox of `key`'s backend, not started yet."""
    limits, gpus, env = key.limits_for_start(), list(key.gpus), dict(key.env)
    if key.backend[0] == "docker":
        from grader.sandbox.docker_warm import WarmDocker

        _name, image, user = key.backend
        return WarmDocker(limits, gpus, env, idle_s, image, user)
    return WarmBwrap(limits, gpus, env, idle_s, bwrap)


@dataclass
class PoolStats:
    started: int = 0
    served: int = 0  # launches a warm sandbox ran
    cold: int = 0  # launches that found none (or a dead one) and started cold
    failed_starts: int = 0
    by_key: dict[WarmKey, int] = field(default_factory=dict)


class WarmPool:
    def __init__(self, size: int, *, idle_s: float = DEFAULT_IDLE_S, bwrap: str | None = None):
        self.size = size
        self.idle_s = idle_s
        self.bwrap = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        self.cond = threading.Condition()
        self.idle: list[tuple[WarmKey, WarmSandbox]] = []
        self.starting: WarmKey | None = None
        self.target: WarmKey | None = None
        self.requested: WarmKey | None = None
        self.closed = False
        self.stats = PoolStats()
        self.backoff_until = 0.0
        self.thread = threading.Thread(target=self._refill, name="warm-pool", daemon=True)
        self.thread.start()

    # -- the launches' side ---------------------------------------------------------------
    def want(self, key: WarmKey) -> None:
        """Keep sandboxes of `key` ready (the key of the launches this process is making)."""
        with self.cond:
            if self.target != key:
                self.target = key
                self.cond.notify_all()

    def acquire(self, key: WarmKey, wait_s: float = WAIT_FOR_STARTING_S) -> WarmSandbox | None:
        deadline = time.monotonic() + wait_s
        with self.cond:
            if self.target != key:
                self.target = key
            self.requested = key
            self.cond.notify_all()
            while not self.closed:
                for i, (k, sandbox) in enumerate(self.idle):
                    if k == key and sandbox.ready() and sandbox.expires_in() > EXPIRY_MARGIN_S:
                        del self.idle[i]
                        self.stats.served += 1
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
            self.stats.cold += 1
            return None

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
    def _refill(self) -> None:
        while True:
            with self.cond:
                self.cond.wait(0.5)
                if self.closed:
                    return
                stale = self._prune()
                key = self.target
                need = (
                    key is not None
                    and time.monotonic() >= self.backoff_until
                    and sum(1 for k, _s in self.idle if k == key) < self.size
                )
                if need and key is not None:
                    # Room for the target's sandbox: drop idle ones of other keys first.
                    while len(self.idle) >= self.size:
                        for i, (k, _s) in enumerate(self.idle):
                            if k != key:
                                stale.append(self.idle.pop(i)[1])
                                break
                        else:
                            break
                    self.starting = key
                self.requested = None
            for sandbox in stale:
                with contextlib.suppress(Exception):
                    sandbox.destroy()
            if need and key is not None:
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
) -> SandboxOutcome | None:
    """Run the supervisor launch `req` in a warm sandbox; None: none could take it (cold)."""
    pool = get_pool()
    if pool is None:
        return None
    key = WarmKey.for_request(req, backend)
    sandbox = pool.acquire(key)
    if sandbox is None:
        log.info("no warm %s sandbox ready: a cold start", backend[0])
        return None
    try:
        outcome = sandbox.run(req, config_name, on_output)
    finally:
        sandbox.destroy()
    if outcome is None:
        with pool.cond:
            pool.stats.served -= 1
            pool.stats.cold += 1
    else:
        log.info(SERVED_LOG, sandbox.ident)
    return outcome


def prewarm(req_like: SandboxRequest, backend: Backend = BWRAP) -> None:
    """Start warming sandboxes for launches like `req_like` (a worker at start-up)."""
    pool = get_pool()
    if pool is not None:
        pool.want(WarmKey.for_request(req_like, backend))
