"""The warm pool: sandboxes prepared ahead of their launch, one launch each.

A `Pool` is an object its owner creates and closes (a context manager): the app's in-process
backend (app.submissions.backends.LocalBackend), `python -m grader.worker`, the CLI. It keeps up
to `size` sandboxes prepared by their backend (`Sandbox.prepare`, grader.sandbox.bwrap or
grader.sandbox.docker): the supervisor with torch and the harness imported, waiting for a job.
`Pool.run` hands a launch to one of them; the sandbox is destroyed after it, and the pool's refill
threads prepare the next one in the background. No pool (grader.api.grade without one), an empty
pool or a prepared sandbox that died: the launcher starts a cold sandbox.

What the pool prepares: the launches of the grading in progress, in order, then those of the
exercise a learner has open (`want`, from grader.api.hint_exercise) or, without a hint, of the
last grading (the pool learns its plan from the first launch it is asked for). When a grading
runs, the pool refills during it only if the machine has cores beside the grading's largest
launch (`usable_cores`: the CPUs this process may use, within its cgroup's quota) or its owner
has gradings queued (`queued`: then one starts per refill thread at once, a thread per core);
otherwise it starts only what that grading still needs and refills after it. Any sandbox serves
any launch of the same fixed limits (`WarmKey`), the 2-node job's included.

Nothing of it outlives its owner: `close()` destroys every prepared sandbox; its keeper
(grader.sandbox.keeper) removes what an owner killed by SIGKILL left.

Settings: RDV_WARM_POOL=K (0: off; default from cores and memory, `default_size`),
RDV_WARM_IDLE_S (how long an unused sandbox waits before it is replaced; default 600).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType

from grader.sandbox.base import (
    OutputCallback,
    Prepared,
    Sandbox,
    SandboxOutcome,
    SandboxRequest,
)
from grader.sandbox.keeper import Keeper
from grader.sandbox.pool_plan import (
    BWRAP,
    DEFAULT_IDLE_S,
    Backend,
    WarmKey,
    launch_cores,
    pool_size,
    sandbox_for,
    usable_cores,
)
from grader.settings import settings

log = logging.getLogger(__name__)

# A sandbox this close to its idle deadline is not handed out (the job could arrive too late).
EXPIRY_MARGIN_S = 60.0
# How long a launch waits for a sandbox the pool is starting before it starts a cold one.
WAIT_FOR_STARTING_S = 120.0
# Refill threads at most (sandboxes starting at once while gradings are queued).
MAX_STARTERS = 4
# The log line of every launch a warm sandbox served (`make scale-test` counts them).
SERVED_LOG = "a warm sandbox served a launch: %s"


@dataclass
class PoolStats:
    started: int = 0
    served: int = 0  # launches a warm sandbox ran
    cold: int = 0  # launches that found none (or a dead one) and started cold
    failed_starts: int = 0
    by_key: dict[WarmKey, int] = field(default_factory=dict)


class Pool:
    """Prepared sandboxes for the launches most likely next, owned by the grading process
    (the module docstring). `sandboxes` makes the backend of a key (tests pass fakes)."""

    def __init__(
        self,
        size: int,
        *,
        idle_s: float = DEFAULT_IDLE_S,
        bwrap: str | None = None,
        refill: bool = True,  # False: no refill threads (tests of the planning alone)
        sandboxes: Callable[[Backend], Sandbox] | None = None,
    ):
        self.size = size
        self.idle_s = idle_s
        self.bwrap = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        self.sandboxes = sandboxes or (lambda backend: sandbox_for(backend, self.bwrap))
        self.cond = threading.Condition()
        self.idle: list[tuple[WarmKey, Prepared]] = []
        self.starting: list[WarmKey] = []  # keys the refill threads are starting now
        # The launches this process is making, in order (one grading's plan): the pool keeps the
        # next `size` of them ready, cycling.
        self.plan: list[WarmKey] = []
        self.position = 0  # launches of the plan the current grading has made
        self.requested: WarmKey | None = None
        self.busy = 0  # launches running in a sandbox of this pool
        self.waiting = 0  # gradings the owner has queued behind the running ones (`queued`)
        self.closed = False
        self.stats = PoolStats()
        self.backoff_until = 0.0
        # Removes what the prepared sandboxes leave if this process dies (grader.sandbox.keeper).
        self.keeper: Keeper | None = Keeper() if refill else None
        # One refill thread per core (at most MAX_STARTERS): with gradings queued, sandboxes
        # start side by side. Each thread stays for the pool's life: bwrap's --die-with-parent
        # follows the thread that started it.
        starters = max(1, min(MAX_STARTERS, usable_cores()))
        self.threads = [
            threading.Thread(target=self._refill, name=f"warm-pool-{i}", daemon=True)
            for i in range(starters)
        ]
        if refill:
            for thread in self.threads:
                thread.start()

    def __enter__(self) -> Pool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the launches' side ---------------------------------------------------------------
    def want(self, keys: list[WarmKey]) -> None:
        """Keep sandboxes ready for these launches (a grading's, in the order it makes them)."""
        with self.cond:
            if keys and keys != self.plan:
                self.plan = list(keys)
                self.position = 0
                self.cond.notify_all()

    def queued(self, count: int) -> None:
        """The owner has `count` gradings waiting behind the ones running: their sandboxes are
        needed anyway, so the pool refills during a grading and starts one per refill thread
        at once (the machine's cores then go to gradings and starts alike, not idle between)."""
        with self.cond:
            if count != self.waiting:
                self.waiting = max(0, count)
                self.cond.notify_all()

    def acquire(self, key: WarmKey, wait_s: float = WAIT_FOR_STARTING_S) -> Prepared | None:
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
                # One of `key` is starting, or a refill thread is about to start one.
                pending = (
                    key in self.starting
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
        """Destroy every prepared sandbox and end the refill threads and the keeper."""
        with self.cond:
            self.closed = True
            idle, self.idle = self.idle, []
            self.cond.notify_all()
        for _key, sandbox in idle:
            self._destroy(sandbox)
        for thread in self.threads:
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(WAIT_FOR_STARTING_S)  # a sandbox it is starting is destroyed too
        if self.keeper is not None:
            self.keeper.close()

    def _destroy(self, sandbox: Prepared) -> None:
        with contextlib.suppress(Exception):
            sandbox.destroy()
        if self.keeper is not None:
            self.keeper.drop(str(id(sandbox)))

    def counts(self) -> dict[str, int]:
        with self.cond:
            ready = sum(1 for _k, s in self.idle if s.ready())
            return {"idle": len(self.idle), "ready": ready, "size": self.size}

    def idle_pids(self) -> list[int]:
        """The process groups of the idle bwrap sandboxes (tests)."""
        with self.cond:
            idle = [s for _k, s in self.idle if s.alive()]
        pids = [getattr(s, "proc", None) for s in idle]
        return [p.pid for p in pids if p is not None]

    # -- the refill threads (they also start every sandbox's bwrap: --die-with-parent) ------
    def _desired(self) -> list[WarmKey]:
        """The keys the idle pool should hold: the plan's next `size` launches, cycling."""
        if not self.plan:
            return []
        return [self.plan[i % len(self.plan)] for i in range(self.size)]

    def _missing(self) -> list[WarmKey]:
        """Desired keys the idle pool lacks (and no refill thread is starting), in plan order."""
        have = [k for k, _s in self.idle] + self.starting
        missing = []
        for key in self._desired():
            if key in have:
                have.remove(key)
            else:
                missing.append(key)
        return missing

    def _cores_to_spare(self) -> bool:
        """Whether a sandbox can start beside the grading's largest launch (starting one is its
        supervisor's interpreter importing torch, ~3 CPU-s, whatever its ranks: with no core
        beside that launch's ranks it slows that launch)."""
        largest = max((launch_cores(k) for k in self.plan), default=1)
        return usable_cores() > largest

    def _next_key(self) -> tuple[WarmKey | None, list[Prepared]]:
        """The key to start a sandbox for now (None: none), and idle sandboxes to drop for its
        room. A launch waiting comes first; else the plan, but during a grading on a machine
        with no core to spare only what that grading still needs (a sandbox for later gradings
        would take the cores from its launches)."""
        stale: list[Prepared] = []
        # One start at a time, one per refill thread with gradings queued or for a launch
        # waiting for a kind none is starting.
        urgent = self.requested is not None and self.requested not in self.starting
        if len(self.starting) >= (len(self.threads) if self.waiting or urgent else 1):
            return None, stale
        if self.requested is not None:
            key: WarmKey | None = self.requested
        elif self.busy and not self._cores_to_spare() and not self.waiting:
            have = [k for k, _s in self.idle] + self.starting
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
        while len(self.idle) + len(self.starting) >= self.size:
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
                    self.starting.append(key)
                    if self.requested == key:
                        self.requested = None
            for sandbox in stale:
                self._destroy(sandbox)
            if key is not None:
                self._start_one(key)

    def _prune(self) -> list[Prepared]:
        """Idle sandboxes that died or are about to expire, taken out of the pool."""
        keep, gone = [], []
        for k, s in self.idle:
            alive = s.alive()
            if alive and s.expires_in() > EXPIRY_MARGIN_S:
                keep.append((k, s))
            else:
                if not alive and not s.ready():
                    log.warning(
                        "a warm sandbox died before it was ready: %s", s.before_output()[-5:]
                    )
                gone.append(s)
        self.idle = keep
        return gone

    def _start_one(self, key: WarmKey) -> None:
        try:
            sandbox = self.sandboxes(key.backend).prepare(key.preparation(self.idle_s))
        except Exception:
            log.exception("could not start a warm sandbox; launches start cold for a while")
            with self.cond:
                self.starting.remove(key)
                self.stats.failed_starts += 1
                self.backoff_until = time.monotonic() + 30
                self.cond.notify_all()
            return
        leftovers = getattr(sandbox, "leftovers", None)
        if self.keeper is not None and leftovers is not None:
            self.keeper.keep(str(id(sandbox)), leftovers())
        with self.cond:
            self.starting.remove(key)
            if self.closed:
                closed = True
            else:
                closed = False
                self.idle.append((key, sandbox))
                self.stats.started += 1
            self.cond.notify_all()
        if closed:
            self._destroy(sandbox)
            return
        if not sandbox.wait_ready(WAIT_FOR_STARTING_S):
            with self.cond:
                self.stats.failed_starts += 1
                if self.stats.failed_starts >= 3 and self.stats.served == 0:
                    self.backoff_until = time.monotonic() + 60
                self.cond.notify_all()

    # -- what a grading calls ---------------------------------------------------------------
    def run(
        self,
        req: SandboxRequest,
        config_name: str,
        on_output: OutputCallback | None,
        backend: Backend = BWRAP,
        shape: tuple[int, int] = (0, 1),
    ) -> SandboxOutcome | None:
        """Run the supervisor launch `req` in a prepared sandbox (`shape`: ranks per node and
        nodes, grader.launch.plan.launch_shape); None: none could take it (the caller starts a
        cold one)."""
        key = WarmKey.for_request(req, backend, *shape)
        sandbox = self.acquire(key)
        if sandbox is None:
            log.info("no warm %s sandbox ready: a cold start", backend[0])
            return None
        try:
            outcome = sandbox.run(req, config_name, on_output)
        finally:
            self._destroy(sandbox)
            self.release()
        if outcome is None:
            with self.cond:
                self.stats.served -= 1
                self.stats.cold += 1
        else:
            log.info(SERVED_LOG, sandbox.ident)
        return outcome

    @contextlib.contextmanager
    def grading(self) -> Iterator[None]:
        """Around one grading's launches: without a core to spare the pool refills after it,
        not between its launches (a refill takes the cores the next launch needs)."""
        with self.cond:
            self.busy += 1
            self.position = 0
        try:
            yield
        finally:
            self.release()

    def prewarm(
        self, plan: list[tuple[SandboxRequest, tuple[int, int]]], backend: Backend = BWRAP
    ) -> None:
        """Prepare sandboxes of `backend` for these launches, (request, shape as in `run`) each,
        in order."""
        self.want([WarmKey.for_request(req, backend, *shape) for req, shape in plan])


def open_pool(size: int | None = None) -> Pool | None:
    """A pool of `size` (default: RDV_WARM_POOL, or `default_size`) for its caller to own and
    close; None when the size is 0."""
    size = pool_size() if size is None else size
    if size <= 0:
        return None
    return Pool(size, idle_s=settings().warm_idle_s)
