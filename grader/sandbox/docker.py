"""The "docker" backend (production): the same request as a locked-down container.

The image must hold the same Python, venv and grader package at the same absolute paths as the
worker (run the worker from that image: RDV_SANDBOX_IMAGE). The work dir is bind-mounted at
/work, so it must be a path the Docker engine sees (a host path mounted at the same place in a
containerized worker). See README "The sandbox".

One life cycle for both kinds of launch (`DockerBox`): an EMPTY size-capped tmpfs work volume
kept mounted by its holder (grader.sandbox.docker_work) and the sandbox container with
`container_kwargs` (user, read-only root, no network, no capabilities, memory, pids, ulimits, tmpfs,
the sandbox labels the reaper goes by). A cold launch (`DockerSandbox.run`) copies its work dir in
and starts the container with its own command; a prepared one (`DockerSandbox.prepare`, held by the
warm pool) starts `python -m grader.inside.supervisor --wait=S`, which imports torch and the
harness, says READY and waits: `run()` copies the job's files in through the engine's archive API,
the config as the archive's last member (the engine writes it in place; the supervisor takes a
config only once it parses whole). Either serves one launch and is removed, volume and holder with
it. A prepared container that never took its job makes `run()` return None (the caller runs it cold:
a dead warm container is never the learner's error).

What outlives a worker that was SIGKILLed (containers, holders, volumes; all labelled with the
worker) is removed by its pool's keeper (grader.sandbox.keeper, through the docker CLI where
there is one) and by the reaper when a worker starts (grader.sandbox.reaper: its own earlier
life's and those of workers that are gone).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.contract import Limits
from grader.sandbox._keeper import Leftovers
from grader.sandbox.base import (
    DEFAULT_ENV,
    HOME,
    HOSTNAME,
    WORKDIR_INSIDE,
    OutputCallback,
    Preparation,
    SandboxOutcome,
    SandboxRequest,
    SandboxUnavailable,
    wait_for_end,
)
from grader.sandbox.docker_work import WorkVolume, start_container
from grader.sandbox.limits import NOFILE
from grader.sandbox.prepared import PreparedOutput, Readiness, log_untaken, supervisor_wait_argv
from grader.sandbox.process import DRAIN_AFTER_EXIT_S, OutputCap
from grader.sandbox.reaper import LABEL_ROLE, sandbox_labels, worker_container
from grader.sandbox.workdir import remove_special
from grader.settings import settings

log = logging.getLogger(__name__)
DEFAULT_IMAGE = "rendezvous-grader:latest"
DEFAULT_USER = "65534:65534"  # nobody:nogroup
MIB = 1024 * 1024
ROLE_WARM = "warm"  # LABEL_ROLE of a prepared sandbox container (its holder's is "work")
KILLED_EXIT = 128 + 9


def container_kwargs(
    req: SandboxRequest,
    *,
    image: str,
    user: str = DEFAULT_USER,
    name: str | None = None,
    worker: str | None = None,
    work_volume: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `docker.from_env().containers.create` (pure: no engine needed).
    `work_volume`: the size-capped volume to mount at /work (`grader.sandbox.docker_work`);
    without one the job dir is bind-mounted (no disk cap beyond RLIMIT_FSIZE per file)."""
    from docker.types import DeviceRequest, Ulimit

    limits = req.limits
    uid, _, gid = user.partition(":")
    tmpfs_opts = f"rw,nosuid,nodev,size={limits.disk_mb}m"
    kwargs: dict[str, Any] = {
        "image": image,
        # The image's own entrypoint (the grader image's is the worker) never applies.
        "entrypoint": list(req.argv[:1]),
        "command": list(req.argv[1:]),
        "environment": {**DEFAULT_ENV, **req.env},
        "working_dir": WORKDIR_INSIDE,
        "user": user,
        "hostname": HOSTNAME,
        # With no network Docker writes no line for the hostname, and `torchrun --standalone`
        # hangs resolving it (as bwrap's synthesized /etc/hosts avoids).
        "extra_hosts": {HOSTNAME: "127.0.0.1"},
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {
            "/tmp": f"{tmpfs_opts},mode=1777",
            HOME: f"{tmpfs_opts},mode=0700,uid={uid},gid={gid or uid}",
        },
        "shm_size": f"{limits.disk_mb}m",
        "ipc_mode": "private",
        # nocopy: a container started on the EMPTY work volume (a warm one) would otherwise copy
        # up its image's /work, the working dir Docker creates as root 0755, onto the volume's
        # root, and the sandbox's user could no longer write there.
        "volumes": {work_volume: {"bind": WORKDIR_INSIDE, "mode": "rw,nocopy"}}
        if work_volume
        else {str(req.workdir.resolve()): {"bind": WORKDIR_INSIDE, "mode": "rw"}},
        "mem_limit": f"{limits.memory_mb}m",
        "memswap_limit": f"{limits.memory_mb}m",
        "pids_limit": limits.pids,
        "ulimits": [
            Ulimit(name="core", soft=0, hard=0),
            Ulimit(name="fsize", soft=limits.disk_mb * MIB, hard=limits.disk_mb * MIB),
            Ulimit(name="nofile", soft=NOFILE, hard=NOFILE),
        ],
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        # No init: the command (the supervisor) is pid 1 of the container's pid namespace, as
        # in bwrap (--as-pid-1). The kernel then drops every signal sent to it from inside unless
        # it installed a handler, so the learner's code, running as the same uid, cannot SIGKILL
        # it (under tini it was pid 2 and `os.kill(-1, SIGKILL)` ended the grading as an
        # error). When it exits, the kernel kills everything else in the container.
        "init": False,
        "labels": sandbox_labels(worker),
    }
    if req.gpus:
        kwargs["device_requests"] = [
            DeviceRequest(device_ids=[str(g) for g in req.gpus], capabilities=[["gpu"]])
        ]
    if name:
        kwargs["name"] = name
    return kwargs


def engine_client() -> Any:
    """A client of the Docker engine ($DOCKER_HOST), or SandboxUnavailable."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:
        raise SandboxUnavailable(f"cannot reach the Docker engine: {exc}") from exc


class DockerSandbox:
    name = "docker"

    def __init__(
        self,
        image: str | None = None,
        user: str | None = None,
        client: Callable[[], Any] | None = None,
    ) -> None:
        self.image = image or settings().sandbox_image
        self.user = user or settings().sandbox_docker_user
        self.connect = client or engine_client

    def reap_orphans(self, *, include_own: bool = False) -> list[str]:
        """Remove sandbox containers left behind by dead workers (see grader.sandbox.reaper);
        `include_own` when this worker starts: its earlier life's sandboxes too."""
        from grader.sandbox.reaper import reap

        return reap(self.connect(), worker_container(), include_own=include_own)

    def run(self, req: SandboxRequest, on_output: OutputCallback | None = None) -> SandboxOutcome:
        """A cold launch: the box started with the request's work dir and command."""
        box = DockerBox(self, req.limits, req.gpus, req.env, list(req.argv), idle_s=0)
        box.start(req.workdir, OutputCap(req.output_cap_bytes, on_output))
        return box.finish(req)

    def prepare(self, prep: Preparation) -> DockerBox:
        """A box around an empty work volume, its supervisor waiting for a launch."""
        box = DockerBox(
            self,
            prep.limits,
            list(prep.gpus),
            dict(prep.env),
            supervisor_wait_argv(prep),
            idle_s=prep.idle_s,
        )
        box.start(None, None)
        return box


class DockerBox(Readiness):
    """One sandbox container from start to removal, cold or prepared (the module docstring)."""

    def __init__(
        self,
        backend: DockerSandbox,
        limits: Limits,
        gpus: list[int],
        env: dict[str, str],
        argv: list[str],
        *,
        idle_s: float,
    ) -> None:
        self.limits, self.gpus, self.env, self.argv = limits, list(gpus), dict(env), argv
        self.image, self.user, self.connect = backend.image, backend.user, backend.connect
        self.idle_s = idle_s
        self.started = 0.0
        self.prepared = False
        self.work: WorkVolume | None = None
        self.container: Any = None
        self.output = PreparedOutput()
        self.exited = threading.Event()
        self.exit_code: int | None = None
        self.watcher: threading.Thread | None = None
        self.closed = False

    # -- start ----------------------------------------------------------------------------
    def start(self, workdir: Path | None, cap: OutputCap | None) -> None:
        """Start the container: with `workdir` (a cold launch) copied in first and `cap` taking
        the output from the first byte; with None (prepared) on the empty volume."""
        self.started = time.monotonic()
        self.prepared = workdir is None
        if cap is not None:
            self.output.attach(cap)
        try:
            self._start(workdir)
        except BaseException:
            self.destroy()
            raise

    def request(self) -> SandboxRequest:
        """The request `container_kwargs` describes (the work dir is the volume's)."""
        return SandboxRequest(
            workdir=Path(WORKDIR_INSIDE),
            argv=list(self.argv),
            env=dict(self.env),
            limits=self.limits,
            gpus=list(self.gpus),
        )

    def _start(self, workdir: Path | None) -> None:
        client = self.connect()
        worker = worker_container()
        labels = sandbox_labels(worker)
        self.work = WorkVolume(
            client,
            image=self.image,
            user=self.user,
            disk_mb=self.limits.disk_mb,
            labels={**labels, LABEL_ROLE: "work"},
        )
        try:
            self.work.__enter__()  # left in destroy()
            if workdir is not None:
                self.work.copy_in(workdir)
        except Exception as exc:
            raise SandboxUnavailable(f"could not prepare the sandbox's work dir: {exc}") from exc
        kwargs = container_kwargs(
            self.request(),
            image=self.image,
            user=self.user,
            worker=worker,
            work_volume=self.work.name,
        )
        if self.prepared:
            kwargs["labels"] = {**kwargs["labels"], LABEL_ROLE: ROLE_WARM}
        try:
            self.container = start_container(client, **kwargs)
        except Exception as exc:
            raise SandboxUnavailable(f"could not start the sandbox container: {exc}") from exc
        self.watcher = threading.Thread(target=self._watch, name="docker-output", daemon=True)
        self.watcher.start()

    def _watch(self) -> None:
        """The container's output into `output` until it ends, then its exit status."""
        container = self.container
        with contextlib.suppress(Exception):
            for chunk in container.logs(stream=True, follow=True):
                self.output.feed(chunk)
        self.output.flush()
        try:
            self.exit_code = int(container.wait()["StatusCode"])
        except Exception:
            self.exit_code = None
        finally:
            self.exited.set()

    # -- state ----------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.container is not None and not self.exited.is_set() and not self.closed

    @property
    def ident(self) -> str:
        """Which sandbox this is, for the log (the container's short id)."""
        return f"docker container {str(getattr(self.container, 'id', '-'))[:12]}"

    def leftovers(self) -> Leftovers:
        """What would outlive this process if it died now (grader.sandbox.keeper removes it)."""
        containers = [str(getattr(c, "id", "")) for c in (self.container,) if c is not None]
        if self.work is not None and self.work.holder is not None:
            containers.append(str(getattr(self.work.holder, "id", "")))
        volume = self.work.volume if self.work is not None else None
        return Leftovers(
            containers=tuple(c for c in containers if c),
            volumes=(str(volume.name),) if volume is not None else (),
        )

    # -- one launch -----------------------------------------------------------------------
    def run(
        self, req: SandboxRequest, config_name: str, on_output: OutputCallback | None = None
    ) -> SandboxOutcome | None:
        """A prepared box serves `req` (its work dir holds main.py and the config
        `config_name`); None: the container never took it (nothing of the learner's ran)."""
        if not self.ready() or self.work is None:
            self.destroy()
            return None
        work = self.work
        self.output.attach(OutputCap(req.output_cap_bytes, on_output))
        try:
            work.copy_in(req.workdir, last=config_name)  # the supervisor takes it from here
        except Exception as exc:
            # Refused before the config was whole (or so late that the launch is run again cold,
            # from scratch: this container is killed first).
            log.warning("could not copy a job into a warm container (%s); starting a cold one", exc)
            self.destroy()
            return None
        timed_out, duration, oom = self._wait(req.hard_timeout_s, req.cancel)
        lost = work.lost()
        if lost is not None:
            # Whatever the launch wrote went with the volume: it runs again, cold.
            log.warning(
                "the work volume of %s was lost (%s); starting a cold one", self.ident, lost
            )
            self.destroy()
            return None
        try:
            taken = not work.has(config_name)
            if taken:
                self._copy_out(req)
        finally:
            self.destroy()
        if not taken:
            log_untaken("container", req)
            return None
        return self._outcome(timed_out, duration, oom)

    def finish(self, req: SandboxRequest) -> SandboxOutcome:
        """A cold box: wait for its command, copy the work dir back, remove it all."""
        try:
            timed_out, duration, oom = self._wait(req.hard_timeout_s, req.cancel)
            self._copy_out(req)
        finally:
            self.destroy()
        return self._outcome(timed_out, duration, oom)

    def _wait(self, timeout_s: float, cancel: threading.Event | None) -> tuple[bool, float, bool]:
        """(stopped at `timeout_s` or by `cancel`, seconds, OOM-killed) once the container ended
        or was killed."""
        start = time.monotonic()
        timed_out = not wait_for_end(self.exited.wait, timeout_s, cancel)
        if timed_out:
            with contextlib.suppress(Exception):
                self.container.kill()
        self.exited.wait(DRAIN_AFTER_EXIT_S)
        duration = time.monotonic() - start
        if self.watcher is not None:
            self.watcher.join(DRAIN_AFTER_EXIT_S)
        self.output.flush()
        oom = False
        with contextlib.suppress(Exception):
            self.container.reload()
            oom = bool(self.container.attrs["State"].get("OOMKilled"))
        return timed_out, duration, oom

    def _copy_out(self, req: SandboxRequest) -> None:
        assert self.work is not None
        problems = self.work.copy_out(req.workdir)
        if problems:
            log.info("work dir entries not copied back: %s", "; ".join(problems[:10]))
        remove_special(req.workdir, set())

    def _outcome(self, timed_out: bool, duration: float, oom: bool) -> SandboxOutcome:
        cap = self.output.cap
        assert cap is not None
        code = KILLED_EXIT if timed_out or self.exit_code is None else self.exit_code
        return SandboxOutcome(
            exit_code=code,
            timed_out=timed_out,
            oom_killed=oom,
            duration_s=duration,
            output=cap.text(),
            sandbox="docker",
            output_truncated=cap.truncated,
            warm=self.prepared,
        )

    # -- teardown -------------------------------------------------------------------------
    def destroy(self) -> None:
        """Never used, or done: the container, its holder and its volume are removed."""
        if self.closed:
            return
        self.closed = True
        if self.container is not None:
            with contextlib.suppress(Exception):
                self.container.remove(force=True)
        if self.work is not None:
            self.work.__exit__()
            self.work = None
