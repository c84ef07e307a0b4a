"""One pre-started, single-use container: the warm half of the "docker" backend.

`WarmDocker.start()` makes exactly what `DockerSandbox.run` makes for a launch (an EMPTY
size-capped tmpfs work volume kept mounted by its holder, and the sandbox container with the same
`container_kwargs`: user, read-only root, no network, no capabilities, memory, pids, ulimits,
tmpfs, the sandbox labels the reaper goes by), but runs the supervisor as
`python -m grader.supervisor --wait=S`: it imports torch and the harness, says READY, and waits for
a config file to appear in /work. No learner data is in it until `run()` copies the job's files
in through the engine's archive API, the config as the archive's last member (the engine writes
it in place; the supervisor takes a config only once it parses whole). It serves that one launch
and is destroyed, volume and holder with it. `run()` returns None when the container never took
the job (it died, or ended before taking the config): the caller then starts a cold one, so a
dead warm container is never the learner's error.
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
from grader.sandbox.base import WORKDIR_INSIDE, OutputCallback, SandboxOutcome, SandboxRequest
from grader.sandbox.docker import container_kwargs, engine_client
from grader.sandbox.docker_work import WorkVolume, start_container
from grader.sandbox.process import DRAIN_AFTER_EXIT_S, OutputCap
from grader.sandbox.reaper import LABEL_ROLE, sandbox_labels, worker_container
from grader.sandbox.warm_output import WarmReadiness, WarmSink, supervisor_wait_argv
from grader.sandbox.workdir import remove_special

log = logging.getLogger(__name__)

ROLE_WARM = "warm"  # LABEL_ROLE of a warm sandbox container (its holder's is "work")
KILLED_EXIT = 128 + 9


class WarmDocker(WarmReadiness):
    """A sandbox container started ahead of its job (any thread may start it)."""

    def __init__(
        self,
        limits: Limits,
        gpus: list[int],
        env: dict[str, str],
        idle_s: float,
        image: str,
        user: str,
        client: Callable[[], Any] | None = None,
        *,
        spares: int = 0,
        nodes: int = 1,
    ) -> None:
        self.limits, self.gpus, self.env = limits, list(gpus), dict(env)
        self.spares, self.nodes = spares, nodes
        self.idle_s, self.image, self.user = idle_s, image, user
        self.connect = client or engine_client
        self.started = 0.0
        self.work: WorkVolume | None = None
        self.container: Any = None
        self.sink = WarmSink()
        self.exited = threading.Event()
        self.exit_code: int | None = None
        self.watcher: threading.Thread | None = None
        self.closed = False

    # -- start ----------------------------------------------------------------------------
    def start(self) -> None:
        self.started = time.monotonic()
        try:
            self._start()
        except BaseException:
            self.destroy()
            raise

    def request(self) -> SandboxRequest:
        """The request a cold launch of this key would make, less the job: the supervisor
        waits instead of reading a config it is given."""
        return SandboxRequest(
            workdir=Path(WORKDIR_INSIDE),
            argv=supervisor_wait_argv(self.idle_s, self.spares, self.nodes),
            env=dict(self.env),
            limits=self.limits,
            gpus=list(self.gpus),
        )

    def _start(self) -> None:
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
        self.work.__enter__()  # left in destroy()
        kwargs = container_kwargs(
            self.request(),
            image=self.image,
            user=self.user,
            worker=worker,
            work_volume=self.work.name,
        )
        kwargs["labels"] = {**kwargs["labels"], LABEL_ROLE: ROLE_WARM}
        self.container = start_container(client, **kwargs)
        self.watcher = threading.Thread(target=self._watch, name="warm-docker", daemon=True)
        self.watcher.start()

    def _watch(self) -> None:
        """The container's output into the sink until it ends, then its exit status."""
        container = self.container
        with contextlib.suppress(Exception):
            for chunk in container.logs(stream=True, follow=True):
                self.sink.feed(chunk)
        self.sink.flush()
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

    # -- one launch -----------------------------------------------------------------------
    def run(
        self, req: SandboxRequest, config_name: str, on_output: OutputCallback | None = None
    ) -> SandboxOutcome | None:
        """Serve `req` (its work dir holds main.py and the config `config_name`); None: the
        container never took it (nothing of the learner's ran), start a cold one instead."""
        if not self.ready() or self.work is None:
            self.destroy()
            return None
        work = self.work
        self.sink.attach(OutputCap(req.output_cap_bytes, on_output))
        try:
            work.copy_in(req.workdir, last=config_name)  # the supervisor takes it from here
        except Exception as exc:
            # Refused before the config was whole (or so late that the launch is run again cold,
            # from scratch: this container is killed first).
            log.warning("could not copy a job into a warm container (%s); starting a cold one", exc)
            self.destroy()
            return None
        start = time.monotonic()
        timed_out = not self.exited.wait(req.hard_timeout_s)
        if timed_out:
            with contextlib.suppress(Exception):
                self.container.kill()
        self.exited.wait(DRAIN_AFTER_EXIT_S)
        duration = time.monotonic() - start
        if self.watcher is not None:
            self.watcher.join(DRAIN_AFTER_EXIT_S)
        self.sink.flush()
        oom = False
        with contextlib.suppress(Exception):
            self.container.reload()
            oom = bool(self.container.attrs["State"].get("OOMKilled"))
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
                problems = work.copy_out(req.workdir)
                if problems:
                    log.info("work dir entries not copied back: %s", "; ".join(problems[:10]))
                remove_special(req.workdir, set())
        finally:
            self.destroy()
        if not taken:
            log.warning("a warm container ended before taking its job; starting a cold one")
            return None
        cap = self.sink.cap
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
            warm=True,
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
