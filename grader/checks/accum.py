"""Gradient accumulation with `no_sync()`: k micro-batches per optimizer step, one gradient
all-reduce per step (counted by the harness's comm hook in DDP's reducer), and a step that uses
the mean gradient over every micro-batch of every rank (the first-step replay)."""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, skipped
from grader.checks.replayed import first_step_only, step_list
from grader.events import AccumStep, Replay, Step
from grader.i18n import Message, msg

MEAN_TOLERANCE = 0.02  # relative; a loss not divided by k is off by (k - 1) * 100%


def _steps(run: RunView) -> dict[int, list[AccumStep]]:
    return {r.rank: r.typed(AccumStep) for r in run.ranks}


def _first_step() -> str:
    return msg("accum.reached_first_step", "the first optimizer step")


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
            return run.not_reached(_first_step()) or failed(
                msg("accum.no_step", "Rank {rank} took no optimizer step.", rank=rank), rank=rank
            )
        counts = [s.micro for s in steps]
        over = next((s for s in steps if s.micro > k), None)
        if over is not None:
            return failed(
                msg(
                    "accum.too_many_micro",
                    "Rank {rank}'s optimizer step {n} {at} came after {micro} forward passes "
                    "through the DDP model; a step accumulates k = {k} micro-batches.",
                    rank=rank,
                    n=over.n,
                    at=run.at(over.line),
                    micro=over.micro,
                    k=k,
                ),
                rank=rank,
                line=over.line,
            )
        if max(counts) < k:
            first = steps[0]
            return failed(
                msg(
                    "accum.too_few_micro",
                    "Rank {rank} stepped the optimizer after every {most} micro-batch(es) "
                    "(first step {at}): no step accumulated k = {k}.",
                    rank=rank,
                    most=max(counts),
                    at=run.at(first.line),
                    k=k,
                ),
                rank=rank,
                line=first.line,
            )
    steps0 = _steps(run).get(0, [])
    full = sum(s.micro == k for s in steps0)
    return passed(
        msg(
            "accum.micro_ok",
            "Rank 0 took {steps} optimizer steps, {full} of them after exactly k = {k} "
            "micro-batches.",
            steps=len(steps0),
            full=full,
            k=k,
        )
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
            if s.reductions == 1:
                continue
            if s.reductions == 0:
                why = msg(
                    "accum.why_no_allreduce",
                    "no gradient all-reduce ran since the previous step: every micro-batch, the "
                    "last one included, ran under no_sync(), so each rank stepped with its own "
                    "gradient",
                )
            else:
                why = msg(
                    "accum.why_many_allreduces",
                    "DDP all-reduced the gradients {reductions} times since the previous step "
                    "({micro} micro-batches): the micro-batches before the last one must run "
                    "under no_sync()",
                    reductions=s.reductions,
                    micro=s.micro,
                )
            return failed(
                msg(
                    "accum.allreduces",
                    "Before rank {rank}'s optimizer step {n} {at}, {why}.",
                    rank=rank,
                    n=s.n,
                    at=run.at(s.line),
                    why=why,
                ),
                rank=rank,
                line=s.line,
            )
    if not seen:
        return run.not_reached(_first_step()) or failed(
            msg("accum.no_steps", "No rank took an optimizer step, so there was nothing to count.")
        )
    n = len(_steps(run).get(0, []))
    return passed(
        msg(
            "accum.one_allreduce_ok",
            "Each of the {n} optimizer steps followed exactly one gradient all-reduce.",
            n=n,
        )
    )


@check(
    "accum.grad_mean",
    title="The step uses the mean gradient over every micro-batch of every rank",
    hint="Each micro-batch's loss is a mean over that micro-batch; divide it by k before backward "
    "(or divide the accumulated gradients by k before the step), so that the k backward passes add "
    "up to a mean. DDP already averages over the ranks: do not divide by the world size.",
)
def accum_grad_mean(run: RunView, params: dict[str, Any]) -> Outcome:
    rank0 = run.rank(0)
    replays = rank0.typed(Replay) if rank0 else []
    step = rank0.first_typed(Step) if rank0 else None
    line = step.line if step else None
    if not replays:
        replayed = msg("accum.reached_replay", "rank 0's first step could be replayed")
        return run.not_reached(replayed) or failed(
            msg(
                "accum.no_replay",
                "Rank 0 did not report its first step (is the model wrapped in DDP?).",
            )
        )
    judged = [r for r in replays if r.status == "ok" and r.mean_status == "ok"]
    if not judged:
        replay = replays[0]
        reason = replay.reason or msg(
            "accum.loss_unknown", "the loss of a micro-batch could not be identified"
        )
        return skipped(
            msg(
                "accum.not_replayed",
                "The first step could not be replayed: {reason}.",
                reason=reason,
            )
        )
    for replay in judged:
        if (why := _off_mean(replay)) is not None:
            return failed(_not_mean(run, replay, line, why), rank=0, line=line)
    rel = max(float(r.mean_rel_error) for r in judged)
    if first_step_only(judged):
        return passed(
            msg(
                "accum.mean_ok",
                "The first step used the mean gradient of the {micro} micro-batches of all ranks "
                "(replayed in one process; difference {rel:.1e}).",
                micro=int(judged[0].micro_total),
                rel=rel,
            )
        )
    return passed(
        msg(
            "accum.mean_ok_steps",
            "Each of the {n} optimizer steps replayed (steps {steps}) used the mean gradient over "
            "the samples of its micro-batches on all ranks (replayed in one process; largest "
            "difference {rel:.1e}).",
            n=len(judged),
            steps=step_list(judged),
            rel=rel,
        )
    )


def _off_mean(replay: Replay) -> Message | None:
    """Why a replayed step did not use the mean gradient over its window; None when it did."""
    rel, ratio = float(replay.mean_rel_error), float(replay.mean_ratio)
    clipped = bool(replay.clipped)
    # Clipping rescales the step on purpose: then only its direction is judged.
    off = 1.0 - float(replay.mean_cosine) > 1e-4 if clipped else rel > MEAN_TOLERANCE
    if not off:
        return None
    if replay.carried:
        return msg(
            "accum.why_carried",
            "the gradients of the previous optimizer step were still there when this window's "
            "first backward began (clear them with optimizer.zero_grad() after every step), so "
            "this step added them to its own",
        )
    if not clipped and abs(ratio - round(ratio)) < 0.02 * ratio and round(ratio) > 1:
        return msg(
            "accum.why_summed",
            "the step was {ratio:.3g}× too large: the micro-batch gradients were summed, "
            "not averaged",
            ratio=ratio,
        )
    # Divided again: a whole factor of 2 or more, never a step a hair larger or smaller than the
    # mean (that was "1.01× too small" of a step whose norm was larger).
    if (
        not clipped
        and ratio > 0
        and round(1 / ratio) > 1
        and abs(1 / ratio - round(1 / ratio)) < 0.02 / ratio
    ):
        return msg(
            "accum.why_divided",
            "the step was {factor:.3g}× too small: something divided it once more",
            factor=1 / ratio,
        )
    parallel = 1.0 - float(replay.mean_cosine) < 1e-4
    if not clipped and parallel and ratio > 0 and abs(ratio - 1) > 0.02:
        return msg(
            "accum.why_scaled",
            "the step was {ratio:.3g}× the mean: the losses of the micro-batches were weighted "
            "{ratio:.3g} in all instead of 1",
            ratio=ratio,
        )
    return msg("accum.why_differ", "they differ by {rel:.0%}", rel=rel)


def _not_mean(run: RunView, replay: Replay, line: int | None, why: Message) -> Message:
    if replay.step == 1:
        return msg(
            "accum.not_mean",
            "In your run, rank 0's first optimizer step {at} used a gradient of norm "
            "{stepped:.4g}; the mean gradient over the samples of the {micro} micro-batches "
            "of all ranks (replayed in one process) has norm {mean:.4g}: {why}.",
            at=run.at(line),
            stepped=float(replay.norm_stepped),
            micro=int(replay.micro_total),
            mean=float(replay.norm_mean),
            why=why,
        )
    return msg(
        "accum.later_step_not_mean",
        "At optimizer step {step} rank 0's optimizer used a gradient of norm "
        "{stepped:.4g}; the mean gradient over the samples of that step's {micro} micro-batches "
        "on all ranks (replayed in one process from the weights it started with) has norm "
        "{mean:.4g}: {why}.",
        step=replay.step,
        stepped=float(replay.norm_stepped),
        micro=int(replay.micro_total),
        mean=float(replay.norm_mean),
        why=why,
    )
