"""The compose stack under test: docker-compose v1 and the Docker client against the engine
scripts/scale/engine.sh started (DOCKER_HOST), with the CI override file."""

from __future__ import annotations

import io
import json
import os
import secrets
import socket
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
DOCKER = "/usr/bin/docker"  # Debian's client: another `docker` on PATH may lack compose/build
PROJECT = "rdvscale"
SANDBOX_LABEL = "rdv.sandbox"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Stack:
    def __init__(self) -> None:
        self.docker_host = os.environ.get("DOCKER_HOST", "unix:///run/rendezvous-ci/docker.sock")
        socket_path = self.docker_host.removeprefix("unix://")
        state = Path(os.environ.get("RDV_SCALE_STATE", "/var/lib/rendezvous-ci"))
        self.jobs_dir = state / "jobs"
        self.port = free_port()
        self.db_password = secrets.token_urlsafe(24)
        self.env = {
            **os.environ,
            "DOCKER_HOST": self.docker_host,
            "COMPOSE_PROJECT_NAME": PROJECT,
            "RDV_SECRET_KEY": secrets.token_urlsafe(48),
            "POSTGRES_PASSWORD": self.db_password,
            "DOCKER_GID": str(os.stat(socket_path).st_gid),
            "DOCKER_SOCKET": socket_path,
            "RDV_JOBS_DIR": str(self.jobs_dir),
            "RDV_PORT": f"127.0.0.1:{self.port}",
            "RDV_BASE_URL": f"http://127.0.0.1:{self.port}",
            "RDV_BASE_IMAGE": os.environ.get("RDV_BASE_IMAGE", "rendezvous-base:bookworm-1"),
            "RDV_POSTGRES_IMAGE": os.environ.get(
                "RDV_POSTGRES_IMAGE", "rendezvous-postgres:15-bookworm-1"
            ),
        }
        self.base_url = f"http://127.0.0.1:{self.port}"

    def run(self, *argv: str, check: bool = True, quiet: bool = False) -> str:
        done = subprocess.run(
            list(argv), cwd=REPO, env=self.env, capture_output=True, text=True, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")
        if not quiet and done.stderr.strip() and done.returncode != 0:
            print(done.stderr.strip())
        return done.stdout

    def compose(self, *args: str, check: bool = True) -> str:
        files = ["-f", "docker-compose.yml", "-f", "scripts/scale/compose.ci.yml"]
        return self.run("docker-compose", *files, *args, check=check)

    def docker(self, *args: str, check: bool = True) -> str:
        return self.run(DOCKER, *args, check=check)

    def prepare_jobs_dir(self) -> None:
        # The workers run as uid 10001 and bind this path at the same place.
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        os.chown(self.jobs_dir, 10001, 10001)
        self.jobs_dir.chmod(0o750)

    def wait_healthy(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            try:
                response = httpx.get(f"{self.base_url}/healthz", timeout=5)
                if response.status_code == 200:
                    return
                last = response.text
            except httpx.HTTPError as exc:
                last = str(exc)
            time.sleep(1)
        raise TimeoutError(f"the web app never became healthy: {last}")

    def containers(self, service: str) -> list[str]:
        ids = self.compose("ps", "-q", service).split()
        return [cid for cid in ids if cid]

    def inspect(self, container: str) -> dict[str, Any]:
        data: list[dict[str, Any]] = json.loads(self.docker("inspect", container))
        return data[0]

    def sandboxes(self) -> list[str]:
        out = self.docker("ps", "-aq", "--filter", f"label={SANDBOX_LABEL}")
        return out.split()

    def wait_service_healthy(self, service: str, count: int, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ids = self.containers(service)
            states = [self.inspect(cid)["State"] for cid in ids]
            healthy = [s for s in states if (s.get("Health") or {}).get("Status") == "healthy"]
            if len(ids) == count and len(healthy) == count:
                return
            time.sleep(1)
        raise TimeoutError(f"{service}: not {count} healthy containers")

    def sigkill(self, container: str) -> None:
        """SIGKILL the container's main process from the host, as a crash would: the engine
        then restarts it (restart: unless-stopped), unlike `docker kill`, which counts as a stop."""
        pid = int(self.inspect(container)["State"]["Pid"])
        os.kill(pid, 9)

    def logs_of(self, container: str) -> str:
        done = subprocess.run(
            [DOCKER, "logs", container], env=self.env, capture_output=True, text=True, check=False
        )
        return done.stdout + done.stderr

    def files_in(self, container: str, path: str) -> list[str]:
        """The names in `path` of a container, through the engine's archive API (`docker cp`):
        nothing runs in the container (a work volume's holder could not even start an exec
        within its pids limit)."""
        done = subprocess.run(
            [DOCKER, "cp", f"{container}:{path}", "-"],
            env=self.env,
            capture_output=True,
            check=True,
        )
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
            return tar.getnames()

    def warm_launches(self) -> list[str]:
        """The sandbox containers (short ids) that served a launch from a worker's warm pool,
        one entry per launch, from every worker's log."""
        from grader.sandbox.pool import SERVED_LOG

        served = []
        for worker in self.containers("grader-cpu"):
            for line in self.logs_of(worker).splitlines():
                _, found, ident = line.partition(SERVED_LOG % "docker container ")
                if found:
                    served.append(ident.strip())
        return served

    def warm_reruns(self) -> list[str]:
        """The workers' log lines of warm launches that failed the platform and ran again cold
        (grader.launch.host.WARM_RERUN_LOG, grader.sandbox.docker's lost work volume)."""
        marks = ("running it again cold", "was lost (")
        return [
            line
            for worker in self.containers("grader-cpu")
            for line in self.logs_of(worker).splitlines()
            if any(mark in line for mark in marks)
        ]

    def logs(self, service: str) -> str:
        return self.compose("logs", "--no-color", "--tail", "60", service, check=False)

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "-t", "10", check=False)
        leftovers = self.sandboxes()
        if leftovers:
            self.docker("rm", "-f", *leftovers, check=False)
        volumes = self.docker(
            "volume", "ls", "-q", "--filter", f"label={SANDBOX_LABEL}", check=False
        ).split()
        if volumes:  # work volumes of the warm pools' containers, if a worker left any
            self.docker("volume", "rm", "-f", *volumes, check=False)
