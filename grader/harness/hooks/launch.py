"""How the program meets the launcher: the environment torchrun set, what the program changed in
it, `mp.spawn`, and the arguments it gave `init_process_group`."""

from __future__ import annotations

import os
from typing import Any

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.multiprocessing as mp

from grader.events import EnvWrite, InitArgs, LaunchEnv, Spawn
from grader.harness.tracer import Tracer, wrap

# Its init_process_group wrapper is outside the dist hook's: it sees the learner's own arguments,
# before the dist hook forces a finite timeout.
AFTER = ("dist",)

LAUNCH_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
)
SPAWN_MESSAGE = (
    "mp.spawn started its own processes inside a process that torchrun already started as one "
    "rank (the grader stopped it here). Under torchrun every process is already a rank: read "
    "RANK, LOCAL_RANK and WORLD_SIZE from the environment instead of spawning."
)


def install(tracer: Tracer) -> None:
    launched = {k: os.environ.get(k) for k in LAUNCH_VARS}
    tracer.record(
        LaunchEnv(
            rank=launched["RANK"],
            local_rank=launched["LOCAL_RANK"],
            world_size=launched["WORLD_SIZE"],
            local_world_size=launched["LOCAL_WORLD_SIZE"],
            group_rank=launched["GROUP_RANK"],
            master_addr=launched["MASTER_ADDR"],
            master_port=launched["MASTER_PORT"],
            torchelastic_restart_count=launched["TORCHELASTIC_RESTART_COUNT"],
        )
    )
    _watch_environ(tracer, launched)

    def make_spawn(original: Any) -> Any:
        def spawn(*args: Any, **kwargs: Any) -> Any:
            nprocs = kwargs.get("nprocs", args[2] if len(args) > 2 else 1)
            tracer.record(Spawn(line=tracer.where(), nprocs=nprocs))
            raise RuntimeError(SPAWN_MESSAGE)

        return spawn

    wrap(mp, "spawn", make_spawn)
    wrap(mp, "start_processes", make_spawn)

    def make_init(original: Any) -> Any:
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            init_method = kwargs.get("init_method", args[1] if len(args) > 1 else None)
            tracer.record(
                InitArgs(
                    line=tracer.where(),
                    init_method=None if init_method is None else str(init_method)[:200],
                    rank=kwargs.get("rank", args[4] if len(args) > 4 else None),
                    world_size=kwargs.get("world_size", args[3] if len(args) > 3 else None),
                    store=kwargs.get("store") is not None,
                    master_addr=os.environ.get("MASTER_ADDR"),
                    master_port=os.environ.get("MASTER_PORT"),
                )
            )
            return original(*args, **kwargs)

        return init_process_group

    for owner in (dist, c10d):
        wrap(owner, "init_process_group", make_init)


def _watch_environ(tracer: Tracer, launched: dict[str, str | None]) -> None:
    """Record writes to the launcher's variables (os.environ[...] = ..., update, pop, del)."""
    base = type(os.environ)
    if getattr(base, "__rdv_watched__", False):
        return

    class WatchedEnviron(base):  # type: ignore[misc, valid-type]
        __rdv_watched__ = True

        def __setitem__(self, key: str, value: str) -> None:
            if key in launched:
                old = os.environ.get(key)
                tracer.record(
                    EnvWrite(
                        key=key,
                        value=str(value)[:100],
                        before=old,
                        launched=launched[key],
                        line=tracer.where(),
                    )
                )
            super().__setitem__(key, value)

        def __delitem__(self, key: str) -> None:
            if key in launched:
                tracer.record(
                    EnvWrite(
                        key=key,
                        value=None,
                        before=os.environ.get(key),
                        launched=launched[key],
                        line=tracer.where(),
                    )
                )
            super().__delitem__(key)

    try:
        os.environ.__class__ = WatchedEnviron
    except TypeError as exc:
        tracer.fail("launch_env", exc)
