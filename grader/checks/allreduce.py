"""Checks of `data-vs-model-parallelism/allreduce-by-hand`: averaging gradients with all_reduce."""

from __future__ import annotations

import math
from typing import Any

from grader.checks.base import (
    Outcome,
    RunView,
    check,
    failed,
    first_optimizer_steps,
    passed,
    plural,
    ranks_text,
    skipped,
)

TOLERANCE = 1e-4  # relative; float32 sums of a few ranks agree to ~1e-7


def _dot(a: list[list[float]], b: list[list[float]]) -> float:
    return sum(x * y for u, v in zip(a, b, strict=False) for x, y in zip(u, v, strict=False))


def _dist(a: list[float], b: list[float]) -> float:
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=False)))


def _norm(a: list[float]) -> float:
    return math.sqrt(sum(x * x for x in a))


def _first_allreduce_line(run: RunView, rank: int) -> int | None:
    for r, e in run.events("collective_call"):
        if r == rank and e.get("op") == "all_reduce" and e.get("step", 0) == 0:
            return e.get("line")
    return None


@check(
    "allreduce.grad_average",
    title="Gradients are averaged over all ranks",
    hint="After loss.backward(), for every parameter: dist.all_reduce(p.grad, "
    "op=dist.ReduceOp.SUM), then p.grad /= dist.get_world_size(). That is the mean DDP computes.",
)
def grad_average(run: RunView, params: dict[str, Any]) -> Outcome:
    tol = float(params.get("tolerance", TOLERANCE))
    records = {rank: e for rank, e in run.events("hand_grads")}
    if run.events("ddp_init"):
        return failed(
            "The model was wrapped in DistributedDataParallel: this exercise asks you to average "
            "the gradients yourself, with dist.all_reduce, and no DDP.",
            rank=0,
            line=run.events("ddp_init")[0][1].get("line"),
        )
    missing = [r.rank for r in run.ranks if r.rank not in records]
    if missing:
        return failed(
            f"The gradient {ranks_text(missing)} trained with could not be observed: the grader "
            "reads it from the first backward pass of a scalar loss (loss.backward()) up to the "
            "next optimizer.step(), model.zero_grad() or update by hand, and "
            f"{ranks_text(missing)} never got that far.",
            rank=missing[0],
        )
    world = len(run.ranks)
    names = records[0].get("names", [])
    local = [records[r.rank]["local"] for r in run.ranks]
    n = len(names)
    expected = [
        [sum(loc[j][k] for loc in local) / world for k in range(len(local[0][j]))] for j in range(n)
    ]
    worst: tuple[float, int, int] = (0.0, 0, 0)
    bad: dict[int, list[int]] = {}
    for r in run.ranks:
        used = records[r.rank]["used"]
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
        return passed(
            f"At the first step, on every rank, all {plural(n, 'parameter')} had the mean of the "
            f"{world} ranks' own gradients (largest relative difference {worst[0]:.1e}): the "
            "gradient of the whole global batch, as DDP would compute it."
        )
    rank = min(bad)
    line = _first_allreduce_line(run, rank) or records[rank].get("line")
    used = records[rank]["used"]
    wrong = [names[j] for j in bad[rank]]
    what = ", ".join(wrong[:4]) + (f" and {len(wrong) - 4} more" if len(wrong) > 4 else "")
    if not _first_allreduce_line(run, rank):
        return failed(
            f"Rank {rank} made no all_reduce between its backward pass and its first optimizer "
            f"step {run.where(records[rank].get('line'))}: each rank stepped with its own "
            "gradient, so the ranks train on different gradients.",
            rank=rank,
            line=records[rank].get("line"),
        )
    own = [
        j
        for j in bad[rank]
        if used[j] and _dist(used[j], local[rank][j]) <= tol * max(_norm(local[rank][j]), 1e-12)
    ]
    if own and len(own) == len(bad[rank]):
        return failed(
            f"On rank {rank} the gradient of {what} was still rank {rank}'s own at the first "
            f"optimizer step {run.where(records[rank].get('line'))}: "
            f"{'it was' if len(own) == 1 else 'they were'} not averaged "
            f"({len(own)} of {n} parameters).",
            rank=rank,
            line=line,
        )
    ratio = _dot(used, expected) / max(_dot(expected, expected), 1e-30)
    k = int(records[rank].get("n_losses", 1) or 1)
    accumulated = (
        f"the {k} accumulation micro-batches' gradients were added up, not averaged (divide "
        f"each micro-batch's loss by {k})"
    )
    if k > 1 and k == world and abs(ratio - world) < 0.01 * world:
        why = (
            f"{world}x the mean over the global batch: either the gradients were summed over "
            f"the {world} ranks but not divided by the world size, or {accumulated}"
        )
    elif abs(ratio - world) < 0.01 * world:
        why = (
            f"{world}x the mean: the gradients were summed over the {world} ranks but not divided "
            "by the world size"
        )
    elif k > 1 and abs(ratio - k) < 0.01 * k:
        why = f"{k}x the mean over the global batch: {accumulated}"
    elif abs(ratio - 1 / world) < 0.01 / world:
        why = f"1/{world} of the mean: the gradients were divided by the world size twice"
        if records[rank].get("world_scaled"):
            why += " (the loss was already divided by it before backward)"
    elif abs(ratio - 1) > 0.01:
        why = (
            f"{ratio:.3g}x the mean of the ranks' gradients, not 1x (world size {world}: is a "
            "number of ranks hard-coded?)"
        )
    else:
        why = "different from the mean of the ranks' gradients"
    return failed(
        f"On rank {rank}, after the all-reduce {run.where(line)}, the gradient of {what} "
        f"was {why}.",
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
    per_rank = {r.rank: first_optimizer_steps(r.events) for r in run.ranks}
    if not per_rank.get(0):
        return _in_sync_by_loss(run)
    counts = {r: len(s) for r, s in per_rank.items()}
    ref = per_rank[0]
    for rank, mine in sorted(per_rank.items()):
        if rank == 0:
            continue
        for i, (a, b) in enumerate(zip(ref, mine, strict=False)):
            if a.get("digest") != b.get("digest"):
                sa, sb = sum(a.get("sums", [])), sum(b.get("sums", []))
                msg = (
                    f"After optimizer step {i + 1}, rank {rank}'s weights differ from rank 0's "
                    f"(sum of all weights {sb:.6g} vs {sa:.6g})"
                )
                grads = {r: e for r, e in run.events("hand_grads")}
                if i == 0 and 0 in grads and rank in grads and _same(grads[0], grads[rank]):
                    msg += (
                        ": both stepped with the same averaged gradient, so they started from "
                        "different weights"
                    )
                return failed(msg + ".", rank=rank, line=b.get("line") or a.get("line"))
        if counts[rank] != counts[0]:
            return failed(
                f"Rank {rank} took {counts[rank]} optimizer steps and rank 0 took {counts[0]}.",
                rank=rank,
            )
    return passed(
        f"After each of the {plural(counts[0], 'optimizer step')}, all {len(run.ranks)} ranks held "
        "bitwise identical weights."
    )


def _in_sync_by_loss(run: RunView) -> Outcome:
    """Without optimizer steps (updates by hand): compare the weights seen at every loss."""
    seqs = {r.rank: r.of("weights") for r in run.ranks}
    if not seqs.get(0):
        return failed(
            "Rank 0 neither took an optimizer step nor back-propagated a loss, so there was "
            "nothing to compare.",
            rank=0,
        )
    for rank, mine in sorted(seqs.items()):
        for i, (a, b) in enumerate(zip(seqs[0], mine, strict=False)):
            if a.get("digest") != b.get("digest"):
                when = "at the first backward pass" if i == 0 else f"after update {i}"
                return failed(
                    f"{when.capitalize()}, rank {rank}'s weights differ from rank 0's (sum "
                    f"{b.get('sum', 0):.6g} vs {a.get('sum', 0):.6g}).",
                    rank=rank,
                )
    n = len(seqs[0])
    return passed(
        f"At each of the {n} backward passes, all {len(run.ranks)} ranks held bitwise identical "
        "weights (updates made without an optimizer step)."
    )


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ua, ub = a.get("used", []), b.get("used", [])
    return bool(ua) and all(
        _dist(x, y) <= 1e-6 * max(_norm(x), 1e-12) for x, y in zip(ua, ub, strict=False)
    )


def _describe(e: dict[str, Any]) -> str:
    op = e.get("op", "?")
    extra = f", {e['redop']}" if e.get("redop") else ""
    if op == "barrier":
        return "barrier"
    return f"{op} of {e.get('numel', '?')} {e.get('dtype', '')} values{extra}"


def _sig(e: dict[str, Any]) -> tuple[Any, ...]:
    return (e.get("op"), e.get("numel"), e.get("dtype"), e.get("redop"), e.get("src"))


@check(
    "allreduce.collectives_match",
    title="Every rank makes the same collective calls",
    hint="A collective (all_reduce, broadcast, barrier, ...) completes only when every rank calls "
    "it with tensors of the same shape: never call one inside `if rank == 0:`.",
)
def collectives_match(run: RunView, params: dict[str, Any]) -> Outcome:
    seqs = {r.rank: [e for _, e in [(0, e) for e in r.of("collective_call")]] for r in run.ranks}
    if not any(seqs.values()):
        if len(run.ranks) == 1:
            return skipped("A single rank: there was no other rank to match.")
        return failed("No rank made a collective call: the ranks never communicated.")
    ref_rank = max(seqs, key=lambda r: len(seqs[r]))
    for rank, seq in sorted(seqs.items()):
        other = seqs[ref_rank]
        for i, (a, b) in enumerate(zip(other, seq, strict=False)):
            if _sig(a) != _sig(b):
                return failed(
                    f"Collective #{i + 1} differs: rank {ref_rank} called {_describe(a)} "
                    f"{run.where(a.get('line'))}, rank {rank} called {_describe(b)} "
                    f"{run.where(b.get('line'))}.",
                    rank=rank,
                    line=b.get("line"),
                )
        if len(seq) < len(other):
            nxt = other[len(seq)]
            return failed(
                f"Rank {ref_rank} made {len(other)} collective calls and rank {rank} only "
                f"{len(seq)}: rank {ref_rank}'s call #{len(seq) + 1}, {_describe(nxt)} "
                f"{run.where(nxt.get('line'))}, had no partner on rank {rank}, so rank "
                f"{ref_rank} waited in it"
                + (" until the run was stopped." if run.timed_out else "."),
                rank=ref_rank,
                line=nxt.get("line"),
            )
    n = len(seqs[0])
    return passed(f"All {len(run.ranks)} ranks made the same {plural(n, 'collective call')}.")
