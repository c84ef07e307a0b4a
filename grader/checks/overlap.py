"""Checks of `data-vs-model-parallelism/overlap-buckets`: gradients all-reduced in size-capped
buckets, asynchronously, while backward runs (what DDP does), written by hand.

They read what `grader.harness.hooks.overlap` saw in each of the first optimizer steps (when
each gradient became ready, each all-reduce issued and waited on, what the step read) and the
bucket arithmetic of `grader.checks.overlap_model`, never the spelling of the program.
"""

from __future__ import annotations

import math
from typing import Any

from grader.checks import overlap_model as om
from grader.checks.base import Outcome, RunView, check, failed, passed
from grader.events import DdpInit, OverlapLateWait, OverlapParams, OverlapStep
from grader.i18n import Message, msg

CAP_BYTES = 40 * 1024
TOLERANCE = 1e-4


def _cap(params: dict[str, Any]) -> int:
    return int(params.get("cap_bytes", CAP_BYTES))


def _observed(run: RunView) -> tuple[OverlapParams, dict[int, list[OverlapStep]]] | Outcome:
    """The parameters and every rank's recorded steps, or the outcome when there are none."""
    records = [e for _, e in run.typed(OverlapParams)]
    steps = {r.rank: r.typed(OverlapStep) for r in run.ranks}
    if records and all(steps.values()):
        return records[0], steps
    reached = run.not_reached(msg("overlap.what_step", "every rank's first optimizer step"))
    if reached is not None:
        return reached
    missing = [rank for rank, s in steps.items() if not s]
    return failed(
        msg(
            "overlap.unobserved",
            "Rank {rank} took no optimizer step after a backward pass: there was no step whose "
            "gradients could be followed.",
            rank=missing[0] if missing else 0,
        ),
        rank=missing[0] if missing else None,
    )


def _names(params: OverlapParams, members: list[int]) -> str:
    shown = ", ".join(params.names[i] for i in members[:3])
    if len(members) > 3:
        return msg(
            "overlap.names_more", "{names} and {more} more", names=shown, more=len(members) - 3
        )
    return shown


def _line(step: OverlapStep, k: int) -> int | None:
    line = step.calls[k].get("line") if 0 <= k < len(step.calls) else None
    return line if isinstance(line, int) else None


def _layout(params: OverlapParams, steps: list[OverlapStep], cap: int) -> tuple[om.Layout, Any]:
    """The layout the rank's step matches best, and the match (the observed order first)."""
    options = om.layouts(params, steps, cap)
    return options[0], options


@check(
    "overlap.no_ddp",
    title="Gradients are synchronised by your own code, not by DDP",
    hint="This exercise builds what DistributedDataParallel does inside backward(): keep the "
    "model unwrapped and all-reduce the gradients yourself.",
)
def no_ddp(run: RunView, params: dict[str, Any]) -> Outcome:
    for rank, e in run.typed(DdpInit):
        return failed(
            msg(
                "overlap.ddp_wrapped",
                "Rank {rank} wrapped the model in DistributedDataParallel {where}: this exercise "
                "asks you to overlap and bucket the all-reduces yourself, without DDP.",
                rank=rank,
                where=run.where(e.line),
            ),
            rank=rank,
            line=e.line,
        )
    return passed(msg("overlap.no_ddp_ok", "No rank built a DistributedDataParallel."))


def _why(ratio: float, world: int, own: bool, rank: int, rel: float) -> Message:
    if world > 1 and abs(ratio - world) < 0.01 * world:
        return msg(
            "overlap.why_summed",
            "{world}× the mean over the ranks: the bucket was summed but not divided by the "
            "world size",
            world=world,
        )
    if world > 1 and own:
        return msg(
            "overlap.why_own",
            "still rank {rank}'s own gradient: the averaged bucket never reached .grad before "
            "the step (was its all-reduce waited on and copied back?)",
            rank=rank,
        )
    return msg("overlap.why_differs", "{rel:.0%} away from the mean over the ranks", rel=rel)


def _norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def _diff(a: list[float], b: list[float]) -> float:
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=False)))


@check(
    "overlap.grad_mean",
    title="Every optimizer step uses the mean gradient over the ranks",
    hint="All-reduce each bucket with a sum, divide it by the world size once it has arrived "
    "and copy it back into every parameter's .grad before optimizer.step().",
)
def grad_mean(run: RunView, params: dict[str, Any]) -> Outcome:
    seen = _observed(run)
    if isinstance(seen, Outcome):
        return seen
    plist, steps = seen
    tol = float(params.get("tolerance", TOLERANCE))
    world = len(run.ranks)
    width = 1 + max(
        (len(v) for s in steps.values() for e in s for v in e.local + e.used), default=0
    )
    zero = [0.0] * (width - 1)
    numbers = sorted(set.intersection(*({e.n for e in s} for s in steps.values())))
    layout, _ = _layout(plist, steps[min(steps)], _cap(params))
    for n in numbers:
        per_rank = {r: next(e for e in s if e.n == n) for r, s in steps.items()}
        count = len(plist.numels)
        mean = [
            [
                sum((e.local[i] or zero)[j] for e in per_rank.values()) / world
                for j in range(width - 1)
            ]
            for i in range(count)
        ]
        total = math.sqrt(sum(_norm(m) ** 2 for m in mean)) or 1e-12
        for rank in sorted(per_rank):
            e = per_rank[rank]
            used = [u or zero for u in e.used]
            err = math.sqrt(sum(_diff(u, m) ** 2 for u, m in zip(used, mean, strict=False))) / total
            if err <= tol:
                continue
            worst = max(range(count), key=lambda i: _diff(used[i], mean[i]))
            dot = sum(
                x * y for u, m in zip(used, mean, strict=False) for x, y in zip(u, m, strict=False)
            )
            ratio = dot / (total * total)
            own_err = math.sqrt(
                sum(_diff(u, loc or zero) ** 2 for u, loc in zip(used, e.local, strict=False))
            )
            own = own_err <= tol * max(total, 1e-12)
            return failed(
                msg(
                    "overlap.not_mean",
                    "At optimizer step {n} {where}, rank {rank} stepped with a gradient of {param} "
                    "(bucket {bucket}) that was {why} (gradient norm {used:.4g}, mean over the "
                    "ranks {mean:.4g}).",
                    n=n,
                    where=run.where(e.line),
                    rank=rank,
                    param=plist.names[worst],
                    bucket=layout.bucket_of(worst) + 1,
                    why=_why(ratio, world, own, rank, err),
                    used=math.sqrt(sum(_norm(u) ** 2 for u in used)),
                    mean=total,
                ),
                rank=rank,
                line=e.line,
            )
    return passed(
        msg(
            "overlap.grad_mean_ok",
            "At each of the {steps} optimizer steps followed, every rank stepped with the mean of "
            "the {world} ranks' gradients for all {count} parameters.",
            steps=len(numbers),
            world=world,
            count=len(plist.numels),
        )
    )


def _bucket_after_backward(
    run: RunView, plist: OverlapParams, layout: om.Layout, e: OverlapStep, rank: int, cap: int
) -> Outcome | None:
    """Every bucket that was complete during backward, as were the buckets before it (buckets go
    out in order), must be issued before backward returns: not only the first one."""
    m = om.match(e, layout)
    if m.bad_bucket is not None:
        return None  # overlap.buckets says what is wrong with the buckets
    where = om.positions(e)
    end = om.backward_end(e)
    for b, group in enumerate(m.groups):
        ready = [where["ready"].get(i) for i in layout.buckets[b]]
        if any(pos is None or pos > end for pos in ready):
            return None  # this bucket (and so the ones after it) waits for finish() by right
        issued = where["issued"][group[0]]
        if issued > end:
            return failed(
                msg(
                    "overlap.bucket_after_backward",
                    "At step {n}, rank {rank} issued bucket {bucket} ({names}) {where} only after "
                    "backward() had returned, although all its gradients, and those of the "
                    "buckets before it, were ready during backward: only the buckets before it "
                    "overlapped the backward pass. With a cap of {cap:,} bytes there are "
                    "{buckets} buckets; launch each from the gradient hook as soon as its last "
                    "gradient is ready.",
                    n=e.n,
                    rank=rank,
                    bucket=b + 1,
                    names=_names(plist, layout.buckets[b]),
                    where=run.where(_line(e, group[0])),
                    cap=cap,
                    buckets=len(layout.sizes),
                ),
                rank=rank,
                line=_line(e, group[0]),
            )
    return None


@check(
    "overlap.overlapped",
    title="Every bucket's all-reduce starts during backward and finishes before the step",
    hint="Launch each bucket's all-reduce with async_op=True from a gradient hook as soon as its "
    "last gradient is ready, keep the handle, and wait on every handle after backward() and "
    "before optimizer.step().",
)
def overlapped(run: RunView, params: dict[str, Any]) -> Outcome:
    seen = _observed(run)
    if isinstance(seen, Outcome):
        return seen
    plist, steps = seen
    cap = _cap(params)
    late = {(r, e.n, e.k): e.line for r, e in run.typed(OverlapLateWait)}
    for rank in sorted(steps):
        layout, _ = _layout(plist, steps[rank], cap)
        for e in steps[rank]:
            calls = om.grad_calls(e)
            where = om.positions(e)
            stop = om.step_pos(e)
            if not calls:
                return failed(
                    msg(
                        "overlap.no_allreduce",
                        "Rank {rank} made no gradient all-reduce before optimizer step {n} "
                        "{where}: it stepped with its own gradients.",
                        rank=rank,
                        n=e.n,
                        where=run.where(e.line),
                    ),
                    rank=rank,
                    line=e.line,
                )
            last_ready = max(where["ready"].values(), default=-1)
            facts = {"rank": rank, "n": e.n}
            for b, k in enumerate(calls):
                if not e.calls[k].get("async") and where["issued"][k] < last_ready:
                    return failed(
                        msg(
                            "overlap.synchronous",
                            "At step {n}, rank {rank} all-reduced bucket {bucket} {where} without "
                            "async_op=True while the backward pass still had gradients to "
                            "compute: backward stood still until that all-reduce was done.",
                            bucket=b + 1,
                            where=run.where(_line(e, k)),
                            **facts,
                        ),
                        rank=rank,
                        line=_line(e, k),
                    )
            first = calls[0]
            if len(layout.sizes) > 1 and where["issued"][first] > last_ready:
                return failed(
                    msg(
                        "overlap.after_backward",
                        "At step {n}, rank {rank} issued its first all-reduce (bucket 1) {where} "
                        "only after every gradient was ready: nothing overlapped the backward "
                        "pass. With a cap of {cap:,} bytes there are {buckets} buckets; launch "
                        "each as soon as its gradients are ready.",
                        where=run.where(_line(e, first)),
                        cap=cap,
                        buckets=len(layout.sizes),
                        **facts,
                    ),
                    rank=rank,
                    line=_line(e, first),
                )
            for b, k in enumerate(calls):
                w = where["waited"].get(k)
                if w is not None and w < last_ready:
                    line = om.wait_line(e, k)
                    return failed(
                        msg(
                            "overlap.waited_early",
                            "At step {n}, rank {rank} waited {wait_where} on bucket {bucket}'s "
                            "all-reduce right after issuing it {where}, while the backward pass "
                            "still had gradients to compute: each bucket then blocks backward "
                            "and nothing overlaps. Wait on the handles after backward().",
                            bucket=b + 1,
                            where=run.where(_line(e, k)),
                            wait_where=run.where(line),
                            **facts,
                        ),
                        rank=rank,
                        line=line,
                    )
            late_bucket = _bucket_after_backward(run, plist, layout, e, rank, cap)
            if late_bucket is not None:
                return late_bucket
            for b, k in enumerate(calls):
                if not e.calls[k].get("async"):
                    continue
                w = where["waited"].get(k)
                if w is None or w > stop:
                    after = (rank, e.n, k) in late
                    line = late.get((rank, e.n, k))
                    text = (
                        msg(
                            "overlap.waited_after_step",
                            "At step {n}, rank {rank} waited on bucket {bucket}'s all-reduce "
                            "{wait_where} only after optimizer.step() {step_where} had read the "
                            "gradients: the step may use a bucket still in flight.",
                            bucket=b + 1,
                            wait_where=run.where(line),
                            step_where=run.where(e.line),
                            **facts,
                        )
                        if after
                        else msg(
                            "overlap.never_waited",
                            "At step {n}, rank {rank} never waited on bucket {bucket}'s "
                            "all-reduce {where} before optimizer.step() {step_where}: the step "
                            "may read a bucket still in flight.",
                            bucket=b + 1,
                            where=run.where(_line(e, k)),
                            step_where=run.where(e.line),
                            **facts,
                        )
                    )
                    return failed(text, rank=rank, line=line if after else _line(e, k))
    n = len(next(iter(steps.values())))
    return passed(
        msg(
            "overlap.overlapped_ok",
            "In each of the {steps} steps followed, every rank launched each bucket whose "
            "gradients were ready during backward before backward returned, the first while "
            "backward was still computing gradients, and waited on every all-reduce before the "
            "optimizer step.",
            steps=n,
        )
    )
