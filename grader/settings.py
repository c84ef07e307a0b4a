"""The grader's operator settings: one frozen `GraderSettings`, read from the environment once.

| Variable                  | Default                   | Meaning                                  |
|---------------------------|---------------------------|------------------------------------------|
| RDV_SANDBOX               | bwrap                     | the sandbox: bwrap, docker, none (tests) |
| RDV_JOBS_DIR              | the system temp dir       | where job dirs are made (2)              |
| RDV_GPUS                  | the /dev/nvidiaN found    | GPUs this worker may use, e.g. 0,1       |
| RDV_WARM_POOL             | 4, by memory (1)          | sandboxes started ahead; 0: all cold     |
| RDV_WARM_IDLE_S           | 600                       | seconds before an unused one is replaced |
| RDV_PARALLEL_LAUNCHES     | by the cores (3)          | launches of one grading at once          |
| RDV_SANDBOX_UID_BASE      | 3900000                   | bwrap as root: the first uid of jobs     |
| RDV_SANDBOX_SLOTS         | 256                       | bwrap as root: how many uids             |
| RDV_SANDBOX_STATE_DIR     | /run/rdv-sandbox          | bwrap as root: the uid slots' locks      |
| RDV_SANDBOX_IMAGE         | rendezvous-grader:latest  | docker: the image of each container      |
| RDV_SANDBOX_DOCKER_USER   | 65534:65534               | docker: the container's user             |
| RDV_WORKER_HEARTBEAT_FILE | /tmp/rdv-worker-heartbeat | a worker's liveness file                 |
| RDV_QUEUE_URL             | RDV_DATABASE_URL          | a queue worker's PostgreSQL URL          |

Each is the field of `GraderSettings` named like the variable without `RDV_`, in lower case.
(1) As many as the longest grading makes launches (4: env-launch), within a quarter of the free
memory.
(2) With docker, a path the engine sees as well. The worker's flags `--sandbox`, `--gpus` and
`--dsn` override `RDV_SANDBOX`, `RDV_GPUS` and `RDV_QUEUE_URL`.
(3) One on a single core, 2 on 2 to 5 cores, one more per 4 cores beyond (grader.launch.schedule).

`settings()` is the process's settings, read on first use; an entry point (`python -m
grader.worker`, `python -m grader.heartbeat`) reads them as it starts with `load()`, and a worker's
command-line flags replace fields with `configure(...)`. Tests change them with `override(...)`
(or set the variables and call `reset()`). Nothing else in grader/ reads `os.environ`, except the
typed hand-over to the sandbox and its ranks (`grader.launch.wire`, `grader.harness`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ENV = {
    "sandbox": "RDV_SANDBOX",
    "jobs_dir": "RDV_JOBS_DIR",
    "gpus": "RDV_GPUS",
    "warm_pool": "RDV_WARM_POOL",
    "warm_idle_s": "RDV_WARM_IDLE_S",
    "parallel_launches": "RDV_PARALLEL_LAUNCHES",
    "sandbox_uid_base": "RDV_SANDBOX_UID_BASE",
    "sandbox_slots": "RDV_SANDBOX_SLOTS",
    "sandbox_state_dir": "RDV_SANDBOX_STATE_DIR",
    "sandbox_image": "RDV_SANDBOX_IMAGE",
    "sandbox_docker_user": "RDV_SANDBOX_DOCKER_USER",
    "worker_heartbeat_file": "RDV_WORKER_HEARTBEAT_FILE",
    "queue_url": "RDV_QUEUE_URL",
}
DATABASE_URL_ENV = "RDV_DATABASE_URL"


@dataclass(frozen=True)
class GraderSettings:
    sandbox: str = "bwrap"
    jobs_dir: Path | None = None
    gpus: tuple[int, ...] | None = None
    warm_pool: int | None = None
    warm_idle_s: float = 600.0
    parallel_launches: int | None = None
    sandbox_uid_base: int = 3900000
    sandbox_slots: int = 256
    sandbox_state_dir: Path = Path("/run/rdv-sandbox")
    sandbox_image: str = "rendezvous-grader:latest"
    sandbox_docker_user: str = "65534:65534"
    worker_heartbeat_file: Path = Path("/tmp/rdv-worker-heartbeat")
    queue_url: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GraderSettings:
        """The settings in `environ` (default: this process's environment); a value that cannot
        be read raises ValueError naming its variable (`RDV_WARM_POOL` alone falls back to its
        default, with a warning, as it always did)."""
        env = os.environ if environ is None else environ

        def get(field: str) -> str | None:
            value = env.get(ENV[field], "").strip()
            return value or None

        changes: dict[str, Any] = {}
        if (sandbox := get("sandbox")) is not None:  # an unknown one: get_sandbox refuses it
            changes["sandbox"] = sandbox
        if (jobs_dir := get("jobs_dir")) is not None:
            changes["jobs_dir"] = Path(jobs_dir)
        if (gpus := env.get(ENV["gpus"])) is not None:  # "" is no GPU at all
            changes["gpus"] = parse_gpus(gpus)
        if (pool := get("warm_pool")) is not None:
            try:
                changes["warm_pool"] = max(0, int(pool))
            except ValueError:
                log.warning("%s=%r is not a number; using the default", ENV["warm_pool"], pool)
        if (idle := get("warm_idle_s")) is not None:
            changes["warm_idle_s"] = _number(float, "warm_idle_s", idle)
        if (parallel := get("parallel_launches")) is not None:
            changes["parallel_launches"] = max(1, _number(int, "parallel_launches", parallel))
        for field in ("sandbox_uid_base", "sandbox_slots"):
            if (value := get(field)) is not None:
                changes[field] = _number(int, field, value)
        if (state_dir := get("sandbox_state_dir")) is not None:
            changes["sandbox_state_dir"] = Path(state_dir)
        for field in ("sandbox_image", "sandbox_docker_user"):
            if (value := get(field)) is not None:
                changes[field] = value
        if (heartbeat := get("worker_heartbeat_file")) is not None:
            changes["worker_heartbeat_file"] = Path(heartbeat)
        changes["queue_url"] = get("queue_url") or env.get(DATABASE_URL_ENV) or None
        return cls(**changes)

    def replace(self, **changes: Any) -> GraderSettings:
        return dataclasses.replace(self, **changes)


def parse_gpus(text: str) -> tuple[int, ...]:
    """ "0,1" -> (0, 1); "" -> () (no GPU)."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise _bad("gpus", text, "GPU indices such as 0,1") from None


def _number(kind: type[int] | type[float], field: str, value: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise _bad(field, value, "a number") from None


def _bad(field: str, value: str, expected: str) -> ValueError:
    return ValueError(f"{ENV[field]}={value!r}: expected {expected}")


_lock = threading.Lock()
_current: GraderSettings | None = None


def settings() -> GraderSettings:
    """This process's settings, read from the environment on first use."""
    global _current
    with _lock:
        if _current is None:
            _current = GraderSettings.from_env()
        return _current


def load() -> GraderSettings:
    """Read the environment now and make that this process's settings (an entry point starting)."""
    global _current
    fresh = GraderSettings.from_env()
    with _lock:
        _current = fresh
    return fresh


def reset() -> None:
    """Forget the settings: the next `settings()` reads the environment again."""
    global _current
    with _lock:
        _current = None


def configure(**changes: Any) -> GraderSettings:
    """Replace fields of this process's settings (a worker's command-line flags)."""
    global _current
    updated = settings().replace(**changes)
    with _lock:
        _current = updated
    return updated


@contextlib.contextmanager
def override(**changes: Any) -> Iterator[GraderSettings]:
    """These fields changed while the block runs (tests); the settings before it come back."""
    global _current
    before = settings()
    with _lock:
        _current = before.replace(**changes)
        changed = _current
    try:
        yield changed
    finally:
        with _lock:
            _current = before
