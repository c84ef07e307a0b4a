"""Sandbox containers outlive a worker killed mid-job (they are the engine's siblings, not the
worker's children). Each carries labels naming the worker container that started it; the reaper
removes those whose worker is gone: its own from before a restart, and any whose worker
container is no longer running. Workers run it when they start and with every stalled-job check.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LABEL_SANDBOX = "rdv.sandbox"
LABEL_WORKER = "rdv.worker"  # the worker's container (its hostname), when it runs in one
LABEL_ROLE = "rdv.role"  # "work": the holder of a work volume (grader.sandbox.docker_work)


def worker_container() -> str | None:
    """This process's container id as Docker sets the hostname, or None outside a container
    (several host processes share a hostname, so theirs are never reaped by name)."""
    return socket.gethostname() if Path("/.dockerenv").exists() else None


def sandbox_labels(worker: str | None) -> dict[str, str]:
    labels = {LABEL_SANDBOX: "1"}
    if worker:
        labels[LABEL_WORKER] = worker
    return labels


def _is_running(client: Any, container: str) -> bool:
    import docker.errors

    try:
        state = client.containers.get(container).attrs["State"]
    except docker.errors.NotFound:
        return False
    return bool(state.get("Running") or state.get("Restarting"))


def orphans(client: Any, me: str | None, *, include_own: bool) -> list[Any]:
    """Sandboxes whose worker container is gone or stopped, and with `include_own` (a worker
    that is starting, so none of its jobs runs yet) those of this worker's earlier life."""
    found = []
    for container in client.containers.list(all=True, filters={"label": LABEL_SANDBOX}):
        owner = container.labels.get(LABEL_WORKER)
        if not owner:
            continue
        if owner == me:
            if include_own:
                found.append(container)
        elif not _is_running(client, owner):
            found.append(container)
    return found


def reap(client: Any, me: str | None, *, include_own: bool = False) -> list[str]:
    """Remove (killing first) every orphaned sandbox container; returns their names."""
    removed = []
    for container in orphans(client, me, include_own=include_own):
        try:
            container.remove(force=True)
        except Exception as exc:  # gone already, or the engine is busy: the next pass retries
            log.info("could not remove sandbox %s: %s", container.name, exc)
            continue
        removed.append(container.name)
    if removed:
        log.warning("removed %d sandbox container(s) left by dead workers", len(removed))
    _reap_volumes(client, me, include_own=include_own)
    return removed


def _reap_volumes(client: Any, me: str | None, *, include_own: bool) -> None:
    """The work volumes (grader.sandbox.docker_work) of dead workers' sandboxes. A volume still
    mounted by a live sandbox refuses removal; the next pass gets it."""
    try:
        volumes = client.volumes.list(filters={"label": LABEL_SANDBOX})
    except Exception as exc:
        log.info("could not list sandbox volumes: %s", exc)
        return
    for volume in volumes:
        owner = (volume.attrs.get("Labels") or {}).get(LABEL_WORKER)
        if not owner or (owner == me and not include_own):
            continue
        if owner != me and _is_running(client, owner):
            continue
        try:
            volume.remove(force=True)
        except Exception as exc:
            log.info("could not remove sandbox volume %s: %s", volume.name, exc)
