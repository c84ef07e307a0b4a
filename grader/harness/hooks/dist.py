"""Process group: init (finite timeout, backend), destroy, and the Python-level collectives."""

from __future__ import annotations

import datetime
from typing import Any

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from grader.harness.tracer import Tracer, wrap

COLLECTIVES = (
    "barrier",
    "monitored_barrier",
    "all_reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "reduce",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "scatter_object_list",
)


def install(tracer: Tracer) -> None:
    limit = float(tracer.settings.get("pg_timeout_seconds", 30))
    counts: dict[str, int] = {}
    tracer.state["collective_counts"] = counts

    def make_init(original: Any) -> Any:
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            line = tracer.where()
            requested = args[0] if args else kwargs.get("backend")
            timeout = kwargs.get("timeout")
            if not isinstance(timeout, datetime.timedelta) or timeout.total_seconds() > limit:
                kwargs["timeout"] = datetime.timedelta(seconds=limit)
            try:
                out = original(*args, **kwargs)
            except BaseException as exc:
                tracer.emit("init_error", requested=requested, error=repr(exc)[:500], line=line)
                raise
            try:
                backend = str(dist.get_backend())
            except Exception:
                backend = None
            tracer.emit(
                "init",
                requested=None if requested is None else str(requested),
                backend=backend,
                rank=dist.get_rank(),
                world_size=dist.get_world_size(),
                line=line,
            )
            return out

        return init_process_group

    def make_destroy(original: Any) -> Any:
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            tracer.emit("destroy", line=tracer.where(), group=bool(args or kwargs))
            return original(*args, **kwargs)

        return destroy_process_group

    def make_collective(name: str) -> Any:
        def make(original: Any) -> Any:
            def collective(*args: Any, **kwargs: Any) -> Any:
                line = tracer.where()
                if name in ("barrier", "monitored_barrier"):
                    tracer.emit("barrier_enter", line=line)
                out = original(*args, **kwargs)
                if line is not None or name in ("barrier", "monitored_barrier"):
                    counts[name] = counts.get(name, 0) + 1
                tracer.sync += 1
                if name in ("barrier", "monitored_barrier"):
                    tracer.emit("barrier", line=line)
                return out

            return collective

        return make

    for owner in (dist, c10d):
        wrap(owner, "init_process_group", make_init)
        wrap(owner, "destroy_process_group", make_destroy)
        for name in COLLECTIVES:
            wrap(owner, name, make_collective(name))
    tracer.finalizers.append(lambda: tracer.emit("collectives", counts=dict(counts)))
