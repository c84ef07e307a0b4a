"""Process group: init (finite timeout, backend), destroy, and the Python-level collectives.

Every collective that the learner's file reaches (directly, or through a library such as
ZeroRedundancyOptimizer) is counted, and recorded as a `collective_call` event (op, size, line)
*before* it runs, so a rank that hangs in it is still on record; checks compare the sequences
across ranks.
"""

from __future__ import annotations

import datetime
import os
import sys
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from grader.events import (
    Barrier,
    BarrierEnter,
    CollectiveCall,
    CollectiveCalls,
    CollectiveDone,
    Collectives,
    Destroy,
    Init,
    InitError,
)
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
# Counted, but not recorded call by call (allreduce.collectives_match compares the recorded
# sequences; gather_object and scatter_object_list show there through the collectives they call).
UNRECORDED = frozenset({"monitored_barrier", "gather_object", "scatter_object_list"})
MAX_CALL_EVENTS = 4000
# Handles of async calls not yet waited on that the hook keeps (each holds its tensors alive):
# past this many, a call's completion is its return, as for a synchronous one.
MAX_PENDING = 256
_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _called_directly(learner_file: str | None) -> bool:
    """Whether the caller of a collective wrapper (other hooks' wrappers skipped) is the learner's
    file, rather than torch code the learner called (Join, DDP, ZeroRedundancyOptimizer)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_HARNESS_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    return frame is not None and frame.f_code.co_filename == learner_file


def _numel(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return int(value.numel())
    if isinstance(value, (list, tuple)):
        return sum(_numel(v) for v in value)
    return 0


def _dtype(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return str(value.dtype).replace("torch.", "")
    if isinstance(value, (list, tuple)) and value:
        return _dtype(value[0])
    return "-"


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def call_record(
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    i: int,
    line: int,
    step: int,
    direct: bool = True,
) -> CollectiveCall:
    """What one call of collective `name` sends: the values every rank must agree on."""
    first = args[0] if args else next(iter(kwargs.values()), None)
    numel, redop, src = _numel(first), None, None
    if name in ("all_reduce", "reduce"):
        op = kwargs.get("op", args[2] if name == "reduce" and len(args) > 2 else None)
        if name == "all_reduce" and op is None and len(args) > 1:
            op = args[1]
        redop = str(op if op is not None else "SUM").rsplit(".", 1)[-1]
    if name in ("broadcast", "broadcast_object_list"):
        src = _as_int(kwargs.get("src", args[1] if len(args) > 1 else 0))
    if name in ("all_gather", "all_gather_into_tensor", "all_gather_object"):
        out = args[0] if args else kwargs.get("tensor_list", kwargs.get("output_tensor"))
        numel = _numel(out)
    return CollectiveCall(
        i=i,
        line=line,
        step=step,
        op=name,
        numel=numel,
        dtype=_dtype(first),
        redop=redop,
        src=src,
        direct=direct,
    )


def install(tracer: Tracer) -> None:
    limit = tracer.settings.pg_timeout_seconds
    counts: dict[str, int] = {}
    tracer.state["collective_counts"] = counts
    calls = {"n": 0}

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
                tracer.record(
                    InitError(
                        requested=None if requested is None else str(requested),
                        error=repr(exc)[:500],
                        line=line,
                    )
                )
                raise
            try:
                # A group made without a backend answers "undefined" to get_backend(); its config
                # names the accelerator's backend only ("cuda:nccl" on a GPU machine, "cpu:gloo"
                # without one: distributed_c10d.py BackendConfig, torch 2.6+).
                backend = str(dist.get_backend_config())
            except Exception:
                backend = None
            tracer.record(
                Init(
                    requested=None if requested is None else str(requested),
                    backend=backend,
                    rank=dist.get_rank(),
                    world_size=dist.get_world_size(),
                    line=line,
                )
            )
            return out

        return init_process_group

    def make_destroy(original: Any) -> Any:
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            tracer.record(Destroy(line=tracer.where(), group=bool(args or kwargs)))
            return original(*args, **kwargs)

        return destroy_process_group

    # id(handle) -> the recorded call it completes, for calls made with async_op=True (the
    # handles are kept so their ids stay unique until waited on).
    pending: dict[int, tuple[int, Any]] = {}

    def record(
        name: str, line: int, args: tuple[Any, ...], kwargs: dict[str, Any], direct: bool
    ) -> int | None:
        calls["n"] += 1
        if calls["n"] > MAX_CALL_EVENTS:
            return None
        i, step = calls["n"], tracer.steps
        try:
            call = call_record(name, args, kwargs, i=i, line=line, step=step, direct=direct)
        except Exception as exc:
            tracer.fail("collective_call", exc)
            call = CollectiveCall(i=i, line=line, step=step, op=name, direct=direct)
        tracer.record(call)
        return i

    def completed(i: int | None, out: Any) -> None:
        """Call `i` returned: done now, or (a handle came back) when the handle is waited on."""
        if i is None:
            return
        if isinstance(out, c10d.Work) and len(pending) < MAX_PENDING:
            pending[id(out)] = (i, out)
        else:
            tracer.record(CollectiveDone(i=i))

    def waited(handle: Any, depth: int) -> None:
        found = pending.pop(id(handle), None)
        if found is not None:
            tracer.record(CollectiveDone(i=found[0], waited=True, line=tracer.where(depth)))

    def make_collective(name: str) -> Any:
        def make(original: Any) -> Any:
            def collective(*args: Any, **kwargs: Any) -> Any:
                line = tracer.where()
                i = None
                if line is not None and name not in UNRECORDED:
                    i = record(name, line, args, kwargs, _called_directly(tracer.learner_file))
                if name in ("barrier", "monitored_barrier"):
                    tracer.record(BarrierEnter(line=line))
                out = original(*args, **kwargs)
                try:
                    completed(i, out)
                except Exception as exc:
                    tracer.fail("collective_done", exc)
                if line is not None or name in ("barrier", "monitored_barrier"):
                    counts[name] = counts.get(name, 0) + 1
                tracer.sync += 1
                if name in ("barrier", "monitored_barrier"):
                    tracer.record(Barrier(line=line))
                return out

            return collective

        return make

    def make_wait(original: Any) -> Any:
        def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(self, *args, **kwargs)
            if pending:
                try:
                    waited(self, 3)
                except Exception as exc:
                    tracer.fail("collective_wait", exc)
            return out

        return wait

    def make_get_future(original: Any) -> Any:
        def get_future(self: Any, *args: Any, **kwargs: Any) -> Any:
            fut = original(self, *args, **kwargs)
            try:  # waiting on the handle's future (torch.futures.wait_all too) waits on it
                found = pending.get(id(self))
                if found is not None:
                    pending[id(fut)] = (found[0], fut)
            except Exception as exc:
                tracer.fail("collective_future", exc)
            return fut

        return get_future

    def make_wait_all(original: Any) -> Any:
        def wait_all(futures: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(futures, *args, **kwargs)
            if pending and isinstance(futures, (list, tuple)):
                try:
                    for fut in futures:
                        waited(fut, 3)
                except Exception as exc:
                    tracer.fail("collective_wait_all", exc)
            return out

        return wait_all

    for owner in (dist, c10d):
        wrap(owner, "init_process_group", make_init)
        wrap(owner, "destroy_process_group", make_destroy)
        for name in COLLECTIVES:
            wrap(owner, name, make_collective(name))
    wrap(c10d.Work, "wait", make_wait)
    wrap(c10d.Work, "get_future", make_get_future)
    wrap(torch._C.Future, "wait", make_wait)
    wrap(torch.futures, "wait_all", make_wait_all)
    tracer.finalizers.append(lambda: tracer.record(Collectives(counts=dict(counts))))
    tracer.finalizers.append(lambda: tracer.record(CollectiveCalls(n=calls["n"])))
