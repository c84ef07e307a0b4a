"""The keeper process of a warm pool (grader.sandbox.keeper): stdlib only, run by path.

    python -I -B _keeper.py

It reads JSON lines on stdin from the process that owns the pool: {"keep": id, ...leftovers} when
a sandbox starts, {"drop": id} when its owner tore it down itself. At end of input (the owner
closed the pipe, exited or was killed, SIGKILL included) it removes what is still kept, then
exits: each sandbox's process group and cgroup processes are killed, its work dir unmounted and
removed, its cgroup dirs removed; containers and volumes of the Docker backend are removed
through the engine (the docker SDK, imported only then). It runs in a session of its own, so a
signal to the owner's process group does not reach it.
"""

import contextlib
import ctypes
import json
import os
import shutil
import signal
import sys
import time

MNT_DETACH = 2


def _kill_cgroup(path: str) -> None:
    with contextlib.suppress(OSError), open(os.path.join(path, "cgroup.kill"), "w") as f:
        f.write("1")
    for _ in range(100):
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _remove_dir(path: str, mounted: bool) -> None:
    if mounted:
        ctypes.CDLL(None, use_errno=True).umount2(path.encode(), MNT_DETACH)
    shutil.rmtree(path, ignore_errors=True)


def _rmdir(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def _remove_docker(containers: list, volumes: list) -> None:
    try:
        import docker

        client = docker.from_env()
    except Exception as exc:  # no SDK or engine: the reaper removes them at a worker's start
        sys.stderr.write(f"rdv-keeper: cannot reach the Docker engine: {exc}\n")
        return
    for ident in containers:
        with contextlib.suppress(Exception):
            client.containers.get(ident).remove(force=True)
    for name in volumes:
        with contextlib.suppress(Exception):
            client.volumes.get(name).remove(force=True)


def clean(entry: dict) -> None:
    pgid = entry.get("pgid") or 0
    if pgid > 0:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
    for path in entry.get("cgroups", []):
        _kill_cgroup(path)
    mounts = set(entry.get("mounts", []))
    for path in entry.get("dirs", []):
        _remove_dir(path, path in mounts)
    for path in entry.get("cgroups", []):
        _rmdir(path)
    if entry.get("containers") or entry.get("volumes"):
        _remove_docker(entry.get("containers", []), entry.get("volumes", []))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C reaches the owner, not us
    kept: dict = {}
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "keep" in message:
            kept[message["keep"]] = message
        elif "drop" in message:
            kept.pop(message["drop"], None)
    for entry in kept.values():
        try:
            clean(entry)
        except Exception as exc:
            sys.stderr.write(f"rdv-keeper: {type(exc).__name__}: {exc}\n")


if __name__ == "__main__":
    main()
