"""What the warm pool (grader.sandbox.pool) prepares and how much: the key a prepared sandbox
is started with (`WarmKey`), the pool's size from the machine (`default_size`, `usable_cores`)
and its settings. RDV_WARM_POOL=K (0: off), RDV_WARM_IDLE_S (default 600)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.contract import Limits
from grader.sandbox.base import Preparation, Sandbox, SandboxRequest
from grader.settings import GraderSettings, settings

log = logging.getLogger(__name__)

DEFAULT_IDLE_S = GraderSettings.warm_idle_s  # RDV_WARM_IDLE_S unset
# Memory an idle warm sandbox holds (its supervisor and zygote, the ranks' imports done, sharing
# their pages: measured 237 MiB PSS, 128 + 109, on torch 2.13 CPU), for the default size.
IDLE_MIB = 300
# Variables the supervisor sets from the job's config (so they do not split the pool).
LATE_ENV = ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE",)
# Limits the supervisor or the host apply per launch (the rest are fixed when a sandbox starts).
LATE_LIMITS = ("wall_seconds", "output_bytes_per_rank", "pg_timeout_seconds")
# Most launches one grading makes (env-launch: three world sizes and a 2-node job).
MAX_PLAN = 4


def _available_mib() -> int:
    """MemAvailable of /proc/meminfo, in MiB (0: unknown)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


def _cgroup_cpu_quota() -> float | None:
    """The CPUs this process's cgroup may use (cpu.max of v2, cfs quota of v1); None: no cap."""
    candidates = [
        (Path("/sys/fs/cgroup/cpu.max"), None),
        (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")),
    ]
    for quota_file, period_file in candidates:
        with contextlib.suppress(OSError, ValueError):
            if period_file is None:
                quota, period = quota_file.read_text().split()[:2]
            else:
                quota, period = quota_file.read_text().strip(), period_file.read_text().strip()
            if quota in ("max", "-1"):
                return None
            return int(quota) / int(period)
    return None


def usable_cores() -> int:
    """The cores this process may use: the CPUs it may run on, within its cgroup's quota."""
    cores = os.cpu_count() or 1
    with contextlib.suppress(AttributeError, OSError):
        cores = min(cores, len(os.sched_getaffinity(0)))
    quota = _cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, math.floor(quota)))
    return max(1, cores)


def auto_parallel(cores: int) -> int:
    """Launches of one grading at once on a machine of `cores`: two wherever there are two cores
    (a launch of small ranks spends much of its time starting and waiting on its peers, and
    leaves a core idle: measured on 2 cores, the 3 launches of find-the-hang's solution 23.0 s one
    after another, 12.0 s two at once), one more for every further four."""
    return 1 if cores < 2 else 2 + (cores - 2) // 4


def parallel_launches() -> int:
    """RDV_PARALLEL_LAUNCHES (grader.settings), or `auto_parallel` of the usable cores."""
    configured = settings().parallel_launches
    return max(1, configured) if configured is not None else auto_parallel(usable_cores())


def default_size() -> int:
    """As many warm sandboxes as the longest grading makes launches (MAX_PLAN: every launch of
    it served warm, none started beside its ranks; any sandbox serves any launch, WarmKey),
    within a quarter of the free memory. Measured on 2 cores, env-launch's solution (4 launches,
    a 2-node job among them): 6.1 s with 3, 3.3 s with 4."""
    avail_mib = _available_mib()
    by_memory = avail_mib // (4 * IDLE_MIB) if avail_mib else 2
    return max(0, min(MAX_PLAN, by_memory))


def pool_size() -> int:
    """RDV_WARM_POOL (grader.settings), or `default_size` when it is not set."""
    size = settings().warm_pool
    return default_size() if size is None else size


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


@dataclass(frozen=True)
class WarmKey:
    """What a sandbox is started with: launches with the same key can use it.

    `ranks` per node and `nodes` say how many cores a launch keeps busy, not what serves it: a
    prepared sandbox's zygote forks any number of ranks, and for a simulated job of several
    nodes each node's agent, in its node's environment (its slice of the GPUs), so keys that
    differ only in them are equal (grader.inside.zygote, grader.inside.multinode)."""

    limits: str
    gpus: tuple[int, ...]
    env: tuple[tuple[str, str], ...]
    backend: Backend = BWRAP
    ranks: int = field(default=0, compare=False)
    nodes: int = field(default=1, compare=False)

    @classmethod
    def for_request(
        cls, req: SandboxRequest, backend: Backend = BWRAP, ranks: int = 0, nodes: int = 1
    ) -> WarmKey:
        fixed = req.limits.model_dump(exclude=set(LATE_LIMITS))
        env = tuple(sorted((k, v) for k, v in req.env.items() if k not in LATE_ENV))
        return cls(json.dumps(fixed, sort_keys=True), tuple(req.gpus), env, backend, ranks, nodes)

    def limits_for_start(self) -> Limits:
        return Limits(**json.loads(self.limits))

    def preparation(self, idle_s: float) -> Preparation:
        """What a sandbox for this key is prepared with (`Sandbox.prepare`)."""
        return Preparation(self.limits_for_start(), self.gpus, self.env, idle_s)


def sandbox_for(backend: Backend, bwrap: str | None = None) -> Sandbox:
    """The backend that prepares sandboxes of `backend` (a WarmKey's)."""
    if backend[0] == "docker":
        from grader.sandbox.docker import DockerSandbox

        _name, image, user = backend
        return DockerSandbox(image, user)
    from grader.sandbox.bwrap import BwrapSandbox

    return BwrapSandbox(bwrap)


def launch_cores(key: WarmKey) -> int:
    """The cores a launch of `key` keeps busy: one per rank (at least one)."""
    return max(1, key.ranks * key.nodes)
