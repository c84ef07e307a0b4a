"""The "docker" backend (production): the same request as a locked-down container.

The image must hold the same Python, venv and grader package at the same absolute paths as the
worker (run the worker from that image: RDV_SANDBOX_IMAGE). The work dir is bind-mounted at
/work, so it must be a path the Docker engine sees (a host path mounted at the same place in a
containerized worker). See README "The sandbox".
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any

from grader.sandbox.base import (
    WORKDIR_INSIDE,
    OutputCallback,
    SandboxOutcome,
    SandboxRequest,
    SandboxUnavailable,
)
from grader.sandbox.bwrap import DEFAULT_ENV, HOME, HOSTNAME
from grader.sandbox.docker_work import WorkVolume, start_container
from grader.sandbox.limits import NOFILE
from grader.sandbox.process import DRAIN_AFTER_EXIT_S, OutputCap
from grader.sandbox.reaper import LABEL_ROLE, sandbox_labels, worker_container
from grader.sandbox.workdir import remove_special

log = logging.getLogger(__name__)
DEFAULT_IMAGE = "rendezvous-grader:latest"
DEFAULT_USER = "65534:65534"  # nobody:nogroup
MIB = 1024 * 1024


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

    def __init__(self, image: str | None = None, user: str | None = None) -> None:
        self.image = image or os.environ.get("RDV_SANDBOX_IMAGE", DEFAULT_IMAGE)
        self.user = user or os.environ.get("RDV_SANDBOX_DOCKER_USER", DEFAULT_USER)

    def reap_orphans(self, *, include_own: bool = False) -> list[str]:
        """Remove sandbox containers left behind by dead workers (see grader.sandbox.reaper);
        `include_own` when this worker starts: its earlier life's sandboxes too."""
        from grader.sandbox import reaper

        return reaper.reap(self._client(), worker_container(), include_own=include_own)

    def _client(self) -> Any:
        return engine_client()

    def run(self, req: SandboxRequest, on_output: OutputCallback | None = None) -> SandboxOutcome:

        client = self._client()
        labels = sandbox_labels(worker_container())
        work = WorkVolume(
            client,
            image=self.image,
            user=self.user,
            disk_mb=req.limits.disk_mb,
            labels={**labels, LABEL_ROLE: "work"},
        )
        with contextlib.ExitStack() as stack:  # the volume and its holder go on every path
            try:
                stack.enter_context(work)
                work.copy_in(req.workdir)
            except Exception as exc:
                raise SandboxUnavailable(
                    f"could not prepare the sandbox's work dir: {exc}"
                ) from exc
            return self._run_in(client, req, work, on_output)

    def _run_in(
        self, client: Any, req: SandboxRequest, work: WorkVolume, on_output: OutputCallback | None
    ) -> SandboxOutcome:
        import requests

        sink = OutputCap(req.output_cap_bytes, on_output)
        start = time.monotonic()
        kwargs = container_kwargs(
            req, image=self.image, user=self.user, worker=worker_container(), work_volume=work.name
        )
        try:
            container = start_container(client, **kwargs)
        except Exception as exc:
            raise SandboxUnavailable(f"could not start the sandbox container: {exc}") from exc

        def pump() -> None:
            with contextlib.suppress(Exception):
                for chunk in container.logs(stream=True, follow=True):
                    sink.feed(chunk)
            sink.flush()

        reader = threading.Thread(target=pump, name="docker-output", daemon=True)
        reader.start()
        timed_out = False
        exit_code: int | None = None
        oom = False
        try:
            try:
                exit_code = int(container.wait(timeout=req.hard_timeout_s)["StatusCode"])
            except requests.exceptions.RequestException:
                timed_out = True
                with contextlib.suppress(Exception):
                    container.kill()
                exit_code = 128 + 9
            duration = time.monotonic() - start
            reader.join(DRAIN_AFTER_EXIT_S)
            with contextlib.suppress(Exception):
                container.reload()
                oom = bool(container.attrs["State"].get("OOMKilled"))
        finally:
            with contextlib.suppress(Exception):
                container.remove(force=True)
        problems = work.copy_out(req.workdir)
        if problems:
            log.info("work dir entries not copied back: %s", "; ".join(problems[:10]))
        remove_special(req.workdir, set())
        return SandboxOutcome(
            exit_code=exit_code,
            timed_out=timed_out,
            oom_killed=oom,
            duration_s=duration,
            output=sink.text(),
            sandbox=self.name,
            output_truncated=sink.truncated,
        )
