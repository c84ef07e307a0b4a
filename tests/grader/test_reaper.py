"""Sandbox containers of dead workers are found by their labels and removed; a worker's liveness
file backs its container healthcheck. The engine itself is `make scale-test`'s business: here
a small stand-in for the Docker client's containers API."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from grader import heartbeat
from grader.contract import Limits
from grader.sandbox import reaper
from grader.sandbox.base import SandboxRequest
from grader.sandbox.docker import container_kwargs


@dataclass
class FakeContainer:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    running: bool = True
    removed: bool = False

    @property
    def attrs(self) -> dict[str, Any]:
        return {"State": {"Running": self.running, "Restarting": False}}

    def remove(self, force: bool = False) -> None:
        assert force
        self.removed = True


class FakeContainers:
    def __init__(self, *containers: FakeContainer) -> None:
        self.all = {c.name: c for c in containers}

    def list(self, all: bool, filters: dict[str, str]) -> list[FakeContainer]:
        assert all and filters == {"label": reaper.LABEL_SANDBOX}
        return [c for c in self.all.values() if reaper.LABEL_SANDBOX in c.labels and not c.removed]

    def get(self, name: str) -> FakeContainer:
        if name not in self.all:
            raise docker.errors.NotFound(name)
        return self.all[name]


@dataclass
class FakeVolume:
    name: str
    labels: dict[str, str]
    removed: bool = False

    @property
    def attrs(self) -> dict[str, Any]:
        return {"Labels": self.labels}

    def remove(self, force: bool = False) -> None:
        self.removed = True


class FakeVolumes:
    def __init__(self, *volumes: FakeVolume) -> None:
        self.all = list(volumes)

    def list(self, filters: dict[str, str]) -> list[FakeVolume]:
        assert filters == {"label": reaper.LABEL_SANDBOX}
        return [v for v in self.all if not v.removed]


class FakeClient:
    def __init__(self, *containers: FakeContainer, volumes: tuple[FakeVolume, ...] = ()) -> None:
        self.containers = FakeContainers(*containers)
        self.volumes = FakeVolumes(*volumes)


def sandbox(name: str, worker: str | None) -> FakeContainer:
    return FakeContainer(name, reaper.sandbox_labels(worker))


def test_only_sandboxes_of_gone_workers_are_reaped() -> None:
    live, dead = FakeContainer("w-live"), FakeContainer("w-dead", running=False)
    mine = sandbox("s-mine", "w-me")  # this worker's, from before its restart
    client = FakeClient(
        live,
        dead,
        FakeContainer("w-me"),
        mine,
        sandbox("s-live", "w-live"),
        sandbox("s-dead", "w-dead"),
        sandbox("s-removed", "w-removed"),  # its worker container no longer exists
        sandbox("s-host", None),  # started by a worker outside Docker: never reaped by name
        FakeContainer("unrelated"),
    )
    # While this worker runs, its own sandboxes are its current job's.
    assert sorted(reaper.reap(client, me="w-me")) == ["s-dead", "s-removed"]
    assert not client.containers.all["s-mine"].removed
    # Starting again (after a crash), they are leftovers.
    assert reaper.reap(client, me="w-me", include_own=True) == ["s-mine"]
    assert not client.containers.all["s-live"].removed
    assert not client.containers.all["s-host"].removed
    assert not client.containers.all["unrelated"].removed


def test_the_work_volumes_of_gone_workers_are_reaped_too() -> None:
    """A worker killed mid-job leaves its sandbox's size-capped work volume behind."""

    def volume(name: str, worker: str | None) -> FakeVolume:
        return FakeVolume(name, reaper.sandbox_labels(worker))

    client = FakeClient(
        FakeContainer("w-live"),
        FakeContainer("w-me"),
        volumes=(volume("v-live", "w-live"), volume("v-gone", "w-gone"), volume("v-mine", "w-me")),
    )
    reaper.reap(client, me="w-me")
    assert [v.name for v in client.volumes.all if v.removed] == ["v-gone"]
    reaper.reap(client, me="w-me", include_own=True)
    assert [v.name for v in client.volumes.all if v.removed] == ["v-gone", "v-mine"]


def test_sandbox_containers_carry_the_reapers_labels(tmp_path: Path) -> None:
    req = SandboxRequest(workdir=tmp_path, argv=["python", "main.py"], env={}, limits=Limits())
    labels = container_kwargs(req, image="img:1", worker="abc123")["labels"]
    assert labels == {reaper.LABEL_SANDBOX: "1", reaper.LABEL_WORKER: "abc123"}
    assert container_kwargs(req, image="img:1")["labels"] == {reaper.LABEL_SANDBOX: "1"}


def test_heartbeat_is_fresh_only_after_a_recent_beat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "beat"
    monkeypatch.setenv("RDV_WORKER_HEARTBEAT_FILE", str(path))
    assert heartbeat.main(["--max-age", "60"]) == 1  # never beaten
    heartbeat.beat(path)
    assert heartbeat.main(["--max-age", "60"]) == 0
    old = time.time() - 120
    os.utime(path, (old, old))
    assert heartbeat.main(["--max-age", "60"]) == 1
