"""Checks of `data-vs-model-parallelism/allreduce-by-hand`: averaging gradients with all_reduce."""

from __future__ import annotations

import math
from typing import Any

from grader.checks.base import (
    Outcome,
    RunView,
    check,
    failed,
    first_optimizer,
    passed,
    ranks_text,
    skipped,
)
from grader.events import CollectiveCall, DdpInit, HandCarry, HandGrads, Step, Weights
from grader.i18n import Message, msg

TOLERANCE = 1e-4  # relative; float32 sums of a few ranks agree to ~1e-7


def _dot(a: list[list[float]], b: list[list[float]]) -> float:
    return sum(x * y for u, v in zip(a, b, strict=False) for x, y in zip(u, v, strict=False))


def _dist(a: list[float], b: list[float]) -> float:
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=False)))


def _norm(a: list[float]) -> float:
    return math.sqrt(sum(x * x for x in a))


def _first_allreduce_line(run: RunView, rank: int) -> int | None:
    for r, e in run.typed(CollectiveCall):
        if r == rank and e.op == "all_reduce" and e.step == 0:
            return e.line
    return None


def _parameters(n: int) -> Message:
    if n == 1:
        return msg("allreduce.one_parameter", "1 parameter")
    return msg("allreduce.parameters", "{n} parameters", n=n)


def _optimizer_steps(n: int) -> Message:
    if n == 1:
        return msg("allreduce.one_optimizer_step", "1 optimizer step")
    return msg("allreduce.optimizer_steps", "{n} optimizer steps", n=n)


def _names(names: list[str]) -> str:
    """The first four parameter names, and how many more."""
    shown = ", ".join(names[:4])
    if len(names) > 4:
        return msg(
            "allreduce.names_more", "{names} and {more} more", names=shown, more=len(names) - 4
        )
    return shown


def _why(ratio: float, world: int, k: int, world_scaled: bool) -> Message:
    """What the gradient used was, measured against the mean over the global batch."""
    accumulated = msg(
        "allreduce.accumulated",
        "the {k} accumulation micro-batches' gradients were added up, not averaged (divide each "
        "micro-batch's loss by {k})",
        k=k,
    )
    if k > 1 and k == world and abs(ratio - world) < 0.01 * world:
        return msg(
            "allreduce.why_world_or_accumulation",
            "{world}x the mean over the global batch: either the gradients were summed over the "
            "{world} ranks but not divided by the world size, or {accumulated}",
            world=world,
            accumulated=accumulated,
        )
    if abs(ratio - world) < 0.01 * world:
        return msg(
            "allreduce.why_not_divided",
            "{world}x the mean: the gradients were summed over the {world} ranks but not divided "
            "by the world size",
            world=world,
        )
    if k > 1 and abs(ratio - k) < 0.01 * k:
        return msg(
            "allreduce.why_accumulated",
            "{k}x the mean over the global batch: {accumulated}",
            k=k,
            accumulated=accumulated,
        )
    if abs(ratio - 1 / world) < 0.01 / world:
        if world_scaled:
            return msg(
                "allreduce.why_divided_twice_loss",
                "1/{world} of the mean: the gradients were divided by the world size twice (the "
                "loss was already divided by it before backward)",
                world=world,
            )
        return msg(
            "allreduce.why_divided_twice",
            "1/{world} of the mean: the gradients were divided by the world size twice",
            world=world,
        )
    if abs(ratio - 1) > 0.01:
        return msg(
            "allreduce.why_ratio",
            "{ratio:.3g}x the mean of the ranks' gradients, not 1x (world size {world}: is a "
            "number of ranks hard-coded?)",
            ratio=ratio,
            world=world,
        )
    return msg("allreduce.why_different", "different from the mean of the ranks' gradients")


@check(
    "allreduce.grad_average",
    title="Gradients are averaged over all ranks",
    hint="After loss.backward(), for every parameter: dist.all_reduce(p.grad, "
    "op=dist.ReduceOp.SUM), then p.grad /= dist.get_world_size(). That is the mean DDP computes.",
)
def grad_average(run: RunView, params: dict[str, Any]) -> Outcome:
    tol = float(params.get("tolerance", TOLERANCE))
    records = dict(run.typed(HandGrads))
    wraps = run.typed(DdpInit)
    if wraps:
        return failed(
            msg(
                "allreduce.ddp_wrapped",
                "The model was wrapped in DistributedDataParallel: this exercise asks you to "
                "average the gradients yourself, with dist.all_reduce, and no DDP.",
            ),
            rank=0,
            line=wraps[0][1].line,
        )
    missing = [r.rank for r in run.ranks if r.rank not in records]
    if missing:
        unobserved = (
            msg(
                "allreduce.unobserved_one",
                "The gradient {ranks} trained with could not be observed: the grader reads it "
                "from the first backward pass of a scalar loss (loss.backward()) up to the next "
                "optimizer.step(), model.zero_grad() or update by hand, and {ranks} never got "
                "that far.",
                ranks=ranks_text(missing),
            )
            if len(missing) == 1
            else msg(
                "allreduce.unobserved",
                "The gradient {ranks} trained with could not be observed: the grader reads it "
                "from the first backward pass of a scalar loss (loss.backward()) up to the next "
                "optimizer.step(), model.zero_grad() or update by hand, and {ranks} never got "
                "that far.",
                ranks=ranks_text(missing),
            )
        )
        return failed(unobserved, rank=missing[0])
    world = len(run.ranks)
    names = records[0].names
    local = [records[r.rank].local for r in run.ranks]
    n = len(names)
    expected = [
        [sum(loc[j][k] for loc in local) / world for k in range(len(local[0][j]))] for j in range(n)
    ]
    worst: tuple[float, int, int] = (0.0, 0, 0)
    bad: dict[int, list[int]] = {}
    for r in run.ranks:
        used = records[r.rank].used
        for j in range(n):
            if not used[j]:
                bad.setdefault(r.rank, []).append(j)
                continue
            scale = max(_norm(expected[j]), *(_norm(loc[j]) for loc in local), 1e-12)
            err = _dist(used[j], expected[j]) / scale
            if err > tol:
                bad.setdefault(r.rank, []).append(j)
            if err > worst[0]:
                worst = (err, r.rank, j)
    if not bad:
        carried = sorted((rank, e) for rank, e in run.typed(HandCarry) if e.carried)
        if carried:
            rank, e = carried[0]
            return failed(
                msg(
                    "allreduce.carried",
                    "The first step averaged the gradients, but on rank {rank} they were still "
                    "there when the next backward pass began {where}: nothing cleared them after "
                    "the update, so every later update adds up all the earlier gradients. Clear "
                    "them after each update (optimizer.zero_grad(), or p.grad = None).",
                    rank=rank,
                    where=run.where(e.line),
                ),
                rank=rank,
                line=e.line,
            )
        return passed(
            msg(
                "allreduce.grad_average_ok",
                "At the first step, on every rank, all {parameters} had the mean of the {world} "
                "ranks' own gradients (largest relative difference {worst:.1e}): the gradient of "
                "the whole global batch, as DDP would compute it.",
                parameters=_parameters(n),
                world=world,
                worst=worst[0],
            )
        )
    rank = min(bad)
    mine = records[rank]
    first_allreduce = _first_allreduce_line(run, rank)
    line = first_allreduce or mine.line
    used = mine.used
    what = _names([names[j] for j in bad[rank]])
    if not first_allreduce:
        return failed(
            msg(
                "allreduce.no_all_reduce",
                "Rank {rank} made no all_reduce between its backward pass and its first "
                "optimizer step {where}: each rank stepped with its own gradient, so the ranks "
                "train on different gradients.",
                rank=rank,
                where=run.where(mine.line),
            ),
            rank=rank,
            line=mine.line,
        )
    own = [
        j
        for j in bad[rank]
        if used[j] and _dist(used[j], local[rank][j]) <= tol * max(_norm(local[rank][j]), 1e-12)
    ]
    if own and len(own) == len(bad[rank]):
        facts = {"rank": rank, "what": what, "where": run.where(mine.line), "own": len(own), "n": n}
        return failed(
            msg(
                "allreduce.own_gradient_one",
                "On rank {rank} the gradient of {what} was still rank {rank}'s own at the first "
                "optimizer step {where}: it was not averaged ({own} of {n} parameters).",
                **facts,
            )
            if len(own) == 1
            else msg(
                "allreduce.own_gradient",
                "On rank {rank} the gradient of {what} was still rank {rank}'s own at the first "
                "optimizer step {where}: they were not averaged ({own} of {n} parameters).",
                **facts,
            ),
            rank=rank,
            line=line,
        )
    ratio = _dot(used, expected) / max(_dot(expected, expected), 1e-30)
    k = int(mine.n_losses or 1)
    return failed(
        msg(
            "allreduce.not_the_mean",
            "On rank {rank}, after the all-reduce {where}, the gradient of {what} was {why}.",
            rank=rank,
            where=run.where(line),
            what=what,
            why=_why(ratio, world, k, mine.world_scaled),
        ),
        rank=rank,
        line=line,
    )


@check(
    "allreduce.in_sync",
    title="All ranks hold the same weights after every step",
    hint="Start every replica from rank 0's weights (dist.broadcast(p.data, src=0) for every "
    "parameter before training) and give every rank the same averaged gradient.",
)
def in_sync(run: RunView, params: dict[str, Any]) -> Outcome:
    per_rank = {r.rank: first_optimizer(r.typed(Step)) for r in run.ranks}
    if not per_rank.get(0):
        return _in_sync_by_loss(run)
    counts = {r: len(s) for r, s in per_rank.items()}
    ref = per_rank[0]
    for rank, mine in sorted(per_rank.items()):
        if rank == 0:
            continue
        for i, (a, b) in enumerate(zip(ref, mine, strict=False)):
            if a.digest != b.digest:
                sa, sb = sum(a.sums), sum(b.sums)
                grads = dict(run.typed(HandGrads))
                facts = {"step": i + 1, "rank": rank, "got": sb, "ref": sa}
                if i == 0 and 0 in grads and rank in grads and _same(grads[0], grads[rank]):
                    differ = msg(
                        "allreduce.weights_differ_start",
                        "After optimizer step {step}, rank {rank}'s weights differ from rank 0's "
                        "(sum of all weights {got:.6g} vs {ref:.6g}): both stepped with the same "
                        "averaged gradient, so they started from different weights.",
                        **facts,
                    )
                else:
                    differ = msg(
                        "allreduce.weights_differ",
                        "After optimizer step {step}, rank {rank}'s weights differ from rank 0's "
                        "(sum of all weights {got:.6g} vs {ref:.6g}).",
                        **facts,
                    )
                return failed(differ, rank=rank, line=b.line or a.line)
        if counts[rank] != counts[0]:
            return failed(
                msg(
                    "allreduce.step_counts",
                    "Rank {rank} took {steps} and rank 0 took {steps_0}.",
                    rank=rank,
                    steps=_optimizer_steps(counts[rank]),
                    steps_0=_optimizer_steps(counts[0]),
                ),
                rank=rank,
            )
    return passed(
        msg(
            "allreduce.in_sync_ok",
            "After each of the {steps}, all {world} ranks held bitwise identical weights.",
            steps=_optimizer_steps(counts[0]),
            world=len(run.ranks),
        )
    )


def _in_sync_by_loss(run: RunView) -> Outcome:
    """Without optimizer steps (updates by hand): compare the weights seen at every loss."""
    seqs = {r.rank: r.typed(Weights) for r in run.ranks}
    if not seqs.get(0):
        return failed(
            msg(
                "allreduce.nothing_to_compare",
                "Rank 0 neither took an optimizer step nor back-propagated a loss, so there was "
                "nothing to compare.",
            ),
            rank=0,
        )
    for rank, mine in sorted(seqs.items()):
        for i, (a, b) in enumerate(zip(seqs[0], mine, strict=False)):
            if a.digest != b.digest:
                if i == 0:
                    differ = msg(
                        "allreduce.weights_differ_first_backward",
                        "At the first backward pass, rank {rank}'s weights differ from rank 0's "
                        "(sum {got:.6g} vs {ref:.6g}).",
                        rank=rank,
                        got=b.sum,
                        ref=a.sum,
                    )
                else:
                    differ = msg(
                        "allreduce.weights_differ_update",
                        "After update {update}, rank {rank}'s weights differ from rank 0's (sum "
                        "{got:.6g} vs {ref:.6g}).",
                        update=i,
                        rank=rank,
                        got=b.sum,
                        ref=a.sum,
                    )
                return failed(differ, rank=rank)
    n = len(seqs[0])
    passes = (
        msg("allreduce.one_backward_pass", "1 backward pass")
        if n == 1
        else msg("allreduce.backward_passes", "{n} backward passes", n=n)
    )
    return passed(
        msg(
            "allreduce.in_sync_by_loss_ok",
            "At each of the {passes}, all {world} ranks held bitwise identical weights (updates "
            "made without an optimizer step).",
            passes=passes,
            world=len(run.ranks),
        )
    )


def _same(a: HandGrads, b: HandGrads) -> bool:
    ua, ub = a.used, b.used
    return bool(ua) and all(
        _dist(x, y) <= 1e-6 * max(_norm(x), 1e-12) for x, y in zip(ua, ub, strict=False)
    )


def _describe(e: CollectiveCall) -> Message:
    op = e.op or "?"
    if op == "barrier":
        return msg("allreduce.call_barrier", "barrier")
    numel: int | str = "?" if e.numel is None else e.numel
    call = {"op": op, "numel": numel, "dtype": e.dtype or ""}
    if e.redop:
        return msg(
            "allreduce.call_reduce",
            "{op} of {numel} {dtype} values, {redop}",
            redop=e.redop,
            **call,
        )
    return msg("allreduce.call", "{op} of {numel} {dtype} values", **call)


def _sig(e: CollectiveCall) -> tuple[Any, ...]:
    return (e.op, e.numel, e.dtype, e.redop, e.src)


def _calls(n: int) -> Message:
    if n == 1:
        return msg("allreduce.one_collective_call", "1 collective call")
    return msg("allreduce.collective_calls", "{n} collective calls", n=n)


@check(
    "allreduce.collectives_match",
    title="Every rank makes the same collective calls",
    hint="A collective (all_reduce, broadcast, barrier, ...) completes only when every rank calls "
    "it with tensors of the same shape: never call one inside `if rank == 0:`.",
)
def collectives_match(run: RunView, params: dict[str, Any]) -> Outcome:
    seqs = {r.rank: r.typed(CollectiveCall) for r in run.ranks}
    if not any(seqs.values()):
        if len(run.ranks) == 1:
            return skipped(
                msg("allreduce.single_rank", "A single rank: there was no other rank to match.")
            )
        return failed(
            msg(
                "allreduce.no_collective",
                "No rank made a collective call: the ranks never communicated.",
            )
        )
    ref_rank = max(seqs, key=lambda r: len(seqs[r]))
    for rank, seq in sorted(seqs.items()):
        other = seqs[ref_rank]
        for i, (a, b) in enumerate(zip(other, seq, strict=False)):
            if _sig(a) != _sig(b):
                return failed(
                    msg(
                        "allreduce.call_differs",
                        "Collective #{n} differs: rank {ref_rank} called {ref_call} {ref_where}, "
                        "rank {rank} called {call} {where}.",
                        n=i + 1,
                        ref_rank=ref_rank,
                        ref_call=_describe(a),
                        ref_where=run.where(a.line),
                        rank=rank,
                        call=_describe(b),
                        where=run.where(b.line),
                    ),
                    rank=rank,
                    line=b.line,
                )
        if len(seq) < len(other):
            nxt = other[len(seq)]
            facts = {
                "ref_rank": ref_rank,
                "ref_calls": _calls(len(other)),
                "rank": rank,
                "n": len(seq),
                "next": len(seq) + 1,
                "call": _describe(nxt),
                "where": run.where(nxt.line),
            }
            return failed(
                msg(
                    "allreduce.no_partner_stopped",
                    "Rank {ref_rank} made {ref_calls} and rank {rank} only {n}: rank {ref_rank}'s "
                    "call #{next}, {call} {where}, had no partner on rank {rank}, so rank "
                    "{ref_rank} waited in it until the run was stopped.",
                    **facts,
                )
                if run.timed_out
                else msg(
                    "allreduce.no_partner",
                    "Rank {ref_rank} made {ref_calls} and rank {rank} only {n}: rank {ref_rank}'s "
                    "call #{next}, {call} {where}, had no partner on rank {rank}, so rank "
                    "{ref_rank} waited in it.",
                    **facts,
                ),
                rank=ref_rank,
                line=nxt.line,
            )
    n = len(seqs[0])
    return passed(
        msg(
            "allreduce.collectives_ok",
            "All {world} ranks made the same {calls}.",
            world=len(run.ranks),
            calls=_calls(n),
        )
    )
