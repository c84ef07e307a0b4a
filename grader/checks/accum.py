"""Gradient accumulation with `no_sync()`: k micro-batches per optimizer step, one gradient
all-reduce per step (counted by the harness's comm hook in DDP's reducer), and a step that uses
the mean gradient over every micro-batch of every rank (the first-step replay)."""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, skipped

MEAN_TOLERANCE = 0.02  # relative; a loss not divided by k is off by (k - 1) * 100%


def _steps(run: RunView) -> dict[int, list[dict[str, Any]]]:
    return {r.rank: r.of("accum_step") for r in run.ranks}


@check(
    "accum.micro_batches",
    title="Each optimizer step accumulates the gradients of k micro-batches",
    hint="Call optimizer.step() (and zero_grad) once every k micro-batches, not after every "
    "backward: the gradients of the k backward passes add up in .grad in between.",
)
def accum_micro_batches(run: RunView, params: dict[str, Any]) -> Outcome:
    k = int(params.get("k", 4))
    for rank, steps in sorted(_steps(run).items()):
        if not steps:
            return run.not_reached("the first optimizer step") or failed(
                f"Rank {rank} took no optimizer step.", rank=rank
            )
        counts = [int(s["micro"]) for s in steps]
        over = next((s for s in steps if int(s["micro"]) > k), None)
        if over is not None:
            return failed(
                f"Rank {rank}'s optimizer step {over['n']} {run.at(over.get('line'))} came after "
                f"{over['micro']} forward passes through the DDP model; a step accumulates k = {k} "
                "micro-batches.",
                rank=rank,
                line=over.get("line"),
            )
        if max(counts) < k:
            first = steps[0]
            return failed(
                f"Rank {rank} stepped the optimizer after every {max(counts)} micro-batch(es) "
                f"(first step {run.at(first.get('line'))}): no step accumulated k = {k}.",
                rank=rank,
                line=first.get("line"),
            )
    steps0 = _steps(run).get(0, [])
    full = sum(int(s["micro"]) == k for s in steps0)
    return passed(
        f"Rank 0 took {len(steps0)} optimizer steps, {full} of them after exactly k = {k} "
        "micro-batches."
    )


@check(
    "accum.one_allreduce",
    title="Exactly one gradient all-reduce per optimizer step",
    hint="Run the backward passes of the first k - 1 micro-batches inside "
    "`with ddp_model.no_sync():` and the last one outside it: DDP then all-reduces the accumulated "
    "gradient once, right before the step.",
)
def accum_one_allreduce(run: RunView, params: dict[str, Any]) -> Outcome:
    seen = False
    for rank, steps in sorted(_steps(run).items()):
        for s in steps:
            seen = True
            reductions = int(s["reductions"])
            if reductions == 1:
                continue
            if reductions == 0:
                why = (
                    "no gradient all-reduce ran since the previous step: every micro-batch, the "
                    "last one included, ran under no_sync(), so each rank stepped with its own "
                    "gradient"
                )
            else:
                why = (
                    f"DDP all-reduced the gradients {reductions} times since the previous step "
                    f"({s['micro']} micro-batches): the micro-batches before the last one must run "
                    "under no_sync()"
                )
            return failed(
                f"Before rank {rank}'s optimizer step {s['n']} {run.at(s.get('line'))}, {why}.",
                rank=rank,
                line=s.get("line"),
            )
    if not seen:
        return run.not_reached("the first optimizer step") or failed(
            "No rank took an optimizer step, so there was nothing to count."
        )
    n = len(_steps(run).get(0, []))
    return passed(f"Each of the {n} optimizer steps followed exactly one gradient all-reduce.")


@check(
    "accum.grad_mean",
    title="The step uses the mean gradient over every micro-batch of every rank",
    hint="Each micro-batch's loss is a mean over that micro-batch; divide it by k before backward "
    "(or divide the accumulated gradients by k before the step), so that the k backward passes add "
    "up to a mean. DDP already averages over the ranks: do not divide by the world size.",
)
def accum_grad_mean(run: RunView, params: dict[str, Any]) -> Outcome:
    rank0 = run.rank(0)
    replay = rank0.first("replay") if rank0 else None
    step = rank0.first("step") if rank0 else None
    line = step.get("line") if step else None
    if replay is None:
        return run.not_reached("rank 0's first step could be replayed") or failed(
            "Rank 0 did not report its first step (is the model wrapped in DDP?)."
        )
    if replay.get("status") != "ok" or replay.get("mean_status") != "ok":
        reason = replay.get("reason") or "the loss of a micro-batch could not be identified"
        return skipped(f"The first step could not be replayed: {reason}.")
    micro = int(replay["micro_total"])
    rel, ratio = float(replay["mean_rel_error"]), float(replay["mean_ratio"])
    clipped = bool(replay.get("clipped"))
    # Clipping rescales the step on purpose: then only its direction is judged.
    off = 1.0 - float(replay["mean_cosine"]) > 1e-4 if clipped else rel > MEAN_TOLERANCE
    if off:
        numbers = (
            f"rank 0's first optimizer step {run.at(line)} used a gradient of norm "
            f"{replay['norm_stepped']:.4g}; the mean of the {micro} micro-batch gradients of all "
            f"ranks (replayed in one process, each from its own unscaled loss) has norm "
            f"{replay['norm_mean']:.4g}"
        )
        if not clipped and abs(ratio - round(ratio)) < 0.02 * ratio and round(ratio) > 1:
            why = (
                f"the step was {ratio:.3g}× too large: the micro-batch gradients were summed, "
                "not averaged"
            )
        elif not clipped and ratio > 0 and abs(1 / ratio - round(1 / ratio)) < 0.02 / ratio:
            why = f"the step was {1 / ratio:.3g}× too small: something divided it once more"
        else:
            why = f"they differ by {rel:.0%}"
        return failed(f"In your run, {numbers}: {why}.", rank=0, line=line)
    return passed(
        f"The first step used the mean gradient of the {micro} micro-batches of all ranks "
        f"(replayed in one process; difference {rel:.1e})."
    )
