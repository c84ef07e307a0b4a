"""Overlapped, bucketed gradient all-reduce by hand: when each gradient became ready, when each
all-reduce was issued and waited on, and what the optimizer step read.

Per optimizer step (the first MAX_STEPS), one `OverlapStep`: a timeline of gradient-ready
events (a post-accumulate-grad hook of our own on every parameter of the learner's optimizer,
and any hook of the learner's registered with `Tensor.register_hook`, which sees the gradient
before it is accumulated),
all-reduce calls (with `async_op` and what they send), waits on their `Work` handles (or on
their futures, chained with `then` or not), the end
of each backward pass and the step itself; plus sketches of each parameter's gradient as it
became ready (before any averaging: our hook is registered before any hook of the learner's on
that parameter) and of the gradient the step read. A wait after the step is an
`OverlapLateWait`. Nothing here changes what the program computes.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch.optim.optimizer import register_optimizer_step_pre_hook

from grader.events import OverlapLateWait, OverlapParams, OverlapStep
from grader.harness.hooks.allreduce import _leaves, _names
from grader.harness.tracer import Tracer, quiet, raw, wrap

# Our all_reduce wrapper runs outside dist's (which records the call); our backward wrapper
# outside allreduce's; our step pre-hook after optim's.
AFTER = ("dist", "optim", "allreduce")

MAX_STEPS = 4
MAX_TRACKED_NUMEL = 4_000_000
MAX_CALLS = 512
PROJECTIONS = 4


def wanted(tracer: Tracer) -> bool:
    checks = tracer.settings.checks
    return checks is None or any(str(c).startswith("overlap.") for c in checks)


class _Sketcher:
    """Sum and fixed random projections of a tensor, the same on every rank (seeded by the
    parameter's index), so the sketch of the mean over ranks is the mean of the sketches."""

    def __init__(self) -> None:
        self.proj: dict[int, torch.Tensor] = {}

    def __call__(self, i: int, t: torch.Tensor | None) -> list[float]:
        if t is None:
            return []
        flat = t.detach().reshape(-1).to("cpu", torch.float64)
        rand = self.proj.get(i)
        if rand is None or rand.shape[1] != flat.numel():
            gen = torch.Generator().manual_seed(104729 + i)
            rand = torch.randn(PROJECTIONS, flat.numel(), generator=gen, dtype=torch.float64)
            self.proj[i] = rand
        return [float(flat.sum()), *(float(v) for v in rand @ flat)]


def install(tracer: Tracer) -> None:
    if not wanted(tracer):
        return
    st: dict[str, Any] = {
        "params": None,  # list of tensors, or [] once given up
        "index": {},  # id(param) -> index
        "hooked": set(),  # ids of params carrying our hook
        "cur": None,  # the step being recorded
        "last": None,  # the step recorded last (late waits)
        "local": {},
        "done": False,
    }
    sketch = _Sketcher()

    def new_step() -> dict[str, Any]:
        return {
            "timeline": [],
            "times": [],
            "backward": [],
            "calls": [],
            "works": {},
            "keep": [],
            "stepped": False,
            "seen_by_hook": set(),  # params sketched from a learner's Tensor.register_hook
        }

    def mark(cur: dict[str, Any], token: list[Any]) -> None:
        """One timeline entry, and when it happened (`OverlapStep.times`)."""
        cur["timeline"].append(token)
        cur["times"].append(time.time())

    def on_ready(p: torch.Tensor) -> None:
        cur, i = st["cur"], st["index"].get(id(p))
        if cur is None or cur["stepped"] or i is None:
            return
        try:
            mark(cur, ["r", i])
            if i in cur["seen_by_hook"]:
                return  # sketched from the gradient the learner's hook saw, before it acted
            with quiet(), torch.no_grad():
                st["local"][i] = sketch(i, p.grad)
        except Exception as exc:
            st["done"] = True
            tracer.fail("overlap_ready", exc)

    def on_hook_grad(p: torch.Tensor, grad: Any) -> None:
        """A hook of the learner's on parameter `p` (Tensor.register_hook) is about to run with
        this backward's gradient: the gradient is ready for it, before it is accumulated."""
        cur, i = st["cur"], st["index"].get(id(p))
        if cur is None or cur["stepped"] or i is None or not isinstance(grad, torch.Tensor):
            return
        try:
            mark(cur, ["r", i])
            if i not in cur["seen_by_hook"]:
                cur["seen_by_hook"].add(i)
                with quiet(), torch.no_grad():
                    st["local"][i] = sketch(i, grad)
        except Exception as exc:
            st["done"] = True
            tracer.fail("overlap_ready", exc)

    def make_register_hook(original: Any) -> Any:
        def register_hook(self: Any, hook: Any) -> Any:
            if not (isinstance(self, torch.Tensor) and self.is_leaf and self.requires_grad):
                return original(self, hook)

            def seen(grad: Any) -> Any:
                if not st["done"]:
                    on_hook_grad(self, grad)
                return hook(grad)

            return original(self, seen)

        return register_hook

    wrap(torch.Tensor, "register_hook", make_register_hook)

    def ensure_hook(p: Any) -> None:
        if not isinstance(p, torch.Tensor) or not (p.is_leaf and p.requires_grad):
            return
        if id(p) in st["hooked"]:
            return
        st["hooked"].add(id(p))
        register = raw(torch.Tensor.register_post_accumulate_grad_hook)
        register(p, on_ready)

    def make_register(original: Any) -> Any:
        def register_post_accumulate_grad_hook(self: Any, hook: Any) -> Any:
            try:
                if not st["done"]:
                    ensure_hook(self)  # ours first: it reads the gradient before any averaging
            except Exception as exc:
                tracer.fail("overlap_register", exc)
            return original(self, hook)

        return register_post_accumulate_grad_hook

    wrap(torch.Tensor, "register_post_accumulate_grad_hook", make_register)

    def discover(loss: torch.Tensor) -> None:
        leaves = [t for t in _leaves(loss) if t.requires_grad]
        ids = {id(t) for t in leaves}
        best: list[torch.Tensor] = []
        hits = 0
        for obj in gc.get_objects():
            if isinstance(obj, torch.optim.Optimizer):
                params = [p for g in obj.param_groups for p in g["params"]]
                n = sum(id(p) in ids for p in params)
                if n > hits:
                    best, hits = params, n
        params, source = (best, "optimizer") if best else (leaves, "graph")
        if sum(p.numel() for p in params) > MAX_TRACKED_NUMEL:
            st["params"], st["done"] = [], True
            return
        st["params"] = params
        st["index"] = {id(p): i for i, p in enumerate(params)}
        for p in params:
            ensure_hook(p)
        tracer.record(
            OverlapParams(
                names=_names(tracer, params),
                numels=[int(p.numel()) for p in params],
                itemsizes=[int(p.element_size()) for p in params],
                source=source,
            )
        )

    def emit(cur: dict[str, Any]) -> None:
        tracer.record(
            OverlapStep(
                n=cur["n"],
                line=cur.get("line"),
                timeline=cur["timeline"],
                calls=cur["calls"],
                local=cur["local"],
                used=cur["used"],
                times=cur["times"],
                backward=cur["backward"],
            )
        )

    def make_backward(original: Any) -> Any:
        def backward(*args: Any, **kwargs: Any) -> Any:
            loss: Any = args[0] if args else kwargs.get("tensors")
            cur = None
            try:
                if not st["done"] and isinstance(loss, torch.Tensor) and loss.grad_fn is not None:
                    with quiet():
                        if st["params"] is None:
                            discover(loss)
                    if tracer.steps >= MAX_STEPS:
                        st["done"] = True
                    elif not st["done"]:
                        if st["cur"] is None or st["cur"]["stepped"]:
                            st["last"], st["cur"] = st["cur"], new_step()
                            st["local"] = {}
                        cur = st["cur"]
            except Exception as exc:
                st["done"] = True
                tracer.fail("overlap_backward", exc)
            began = time.time()
            out = original(*args, **kwargs)
            if cur is not None:
                mark(cur, ["e"])
                cur["backward"].append([began, cur["times"][-1]])
            return out

        return backward

    wrap(torch.autograd, "backward", make_backward)

    def grad_ids() -> set[int]:
        return {id(p.grad) for p in st["params"] or () if p.grad is not None}

    def make_all_reduce(original: Any) -> Any:
        def all_reduce(*args: Any, **kwargs: Any) -> Any:
            cur = st["cur"]
            tensor: Any = args[0] if args else kwargs.get("tensor")
            is_async = bool(kwargs.get("async_op", args[3] if len(args) > 3 else False))
            record = (
                isinstance(tensor, torch.Tensor)
                and cur is not None
                and not cur["stepped"]
                and not st["done"]
                and len(cur["calls"]) < MAX_CALLS
                and (tensor.numel() > 1 or id(tensor) in grad_ids())
            )
            k = -1
            if record:
                k = len(cur["calls"])
                op = kwargs.get("op", args[1] if len(args) > 1 else None)
                cur["calls"].append(
                    {
                        "numel": int(tensor.numel()),
                        "bytes": int(tensor.numel() * tensor.element_size()),
                        "dtype": str(tensor.dtype).replace("torch.", ""),
                        "async": is_async,
                        "line": tracer.where(),
                        "redop": str(op if op is not None else "SUM").rsplit(".", 1)[-1],
                    }
                )
                mark(cur, ["a", k])
            out = original(*args, **kwargs)
            if record and out is not None:
                cur["works"][id(out)] = k
                cur["keep"].append(out)  # keeps id(out) unique while the step is recorded
            return out

        return all_reduce

    for owner in (dist, c10d):
        wrap(owner, "all_reduce", make_all_reduce)

    def note_wait(handle: Any) -> None:
        try:
            for step in (st["cur"], st["last"]):
                if step is None or id(handle) not in step["works"]:
                    continue
                k = step["works"][id(handle)]
                line = tracer.where(3)
                if step["stepped"]:
                    tracer.record(OverlapLateWait(n=step["n"], k=k, line=line))
                else:
                    mark(step, ["w", k, line])
                break
        except Exception as exc:
            tracer.fail("overlap_wait", exc)

    def make_wait(original: Any) -> Any:
        def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
            note_wait(self)
            return original(self, *args, **kwargs)

        return wait

    def make_wait_all(original: Any) -> Any:
        def wait_all(futures: Any, *args: Any, **kwargs: Any) -> Any:
            for fut in list(futures) if isinstance(futures, (list, tuple)) else ():
                note_wait(fut)
            return original(futures, *args, **kwargs)

        return wait_all

    wrap(c10d.Work, "wait", make_wait)

    def make_get_future(original: Any) -> Any:
        def get_future(self: Any, *args: Any, **kwargs: Any) -> Any:
            fut = original(self, *args, **kwargs)
            try:  # waiting on the work's future (torch.futures.wait_all too) waits on the work
                for step in (st["cur"], st["last"]):
                    if step is not None and id(self) in step["works"]:
                        step["works"][id(fut)] = step["works"][id(self)]
                        step["keep"].append(fut)
                        break
            except Exception as exc:
                tracer.fail("overlap_future", exc)
            return fut

        return get_future

    wrap(c10d.Work, "get_future", make_get_future)

    def make_then(original: Any) -> Any:
        def then(self: Any, *args: Any, **kwargs: Any) -> Any:
            fut = original(self, *args, **kwargs)
            try:  # a future chained on a work's future completes after it: waiting on it waits
                for step in (st["cur"], st["last"]):
                    if step is not None and id(self) in step["works"]:
                        step["works"][id(fut)] = step["works"][id(self)]
                        step["keep"].append(fut)
                        break
            except Exception as exc:
                tracer.fail("overlap_future", exc)
            return fut

        return then

    wrap(torch._C.Future, "then", make_then)
    wrap(torch._C.Future, "wait", make_wait)
    wrap(torch.futures, "wait_all", make_wait_all)

    def pre_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        cur = st["cur"]
        if cur is None or cur["stepped"] or st["done"]:
            return
        try:
            with quiet(), torch.no_grad():
                params = st["params"] or []
                mark(cur, ["s"])
                cur["n"] = tracer.steps + 1
                cur["line"] = tracer.where()
                cur["used"] = [sketch(i, p.grad) for i, p in enumerate(params)]
                cur["local"] = [st["local"].get(i, []) for i in range(len(params))]
                cur["stepped"] = True
            emit(cur)
        except Exception as exc:
            st["done"] = True
            tracer.fail("overlap_step", exc)

    register_optimizer_step_pre_hook(pre_step)
