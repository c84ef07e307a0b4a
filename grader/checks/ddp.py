"""DDP itself: the model is wrapped, ranks stay identical, gradients are averaged exactly once."""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, skipped
from grader.checks.replayed import (
    GRAD_TOLERANCE,
    averaged,
    judge_later_step,
    why_not_averaged,
    with_zero_warning,
    zero_gradient,
)
from grader.events import ClosureLoss, DdpForward, DdpInit, Replay, Step
from grader.i18n import Message, msg

SUM_TOLERANCE = 1e-5
FIRST_STEP = msg("ddp.reached_first_step", "the first optimizer step")


@check(
    "ddp.wrapped",
    title="The model is wrapped in DistributedDataParallel",
    hint="Wrap the model after moving it to its device: ddp_model = DDP(model, device_ids=...); "
    "run the forward pass through ddp_model and build the optimizer from ddp_model.parameters().",
)
def ddp_wrapped(run: RunView, params: dict[str, Any]) -> Outcome:
    inits = {rank: e for rank, e in run.typed(DdpInit)}
    missing = [r.rank for r in run.ranks if r.rank not in inits]
    if missing:
        wrapped = msg("ddp.reached_wrapped", "every rank wrapped its model")
        if (early := run.not_reached(wrapped)) and not inits:
            return early
        return failed(_never_wrapped(missing), rank=missing[0])
    for r in run.ranks:
        steps = r.typed(Step)
        if not steps:
            continue
        first = steps[0]
        # Every optimizer the program steps, not only the first one (a record without a count,
        # n 0, is taken for a first step).
        for opening in (e for e in steps if e.n <= 1):
            if opening.ddp_frac is not None and opening.ddp_frac < 1.0:
                return failed(
                    _not_ddp_parameters(r.rank, opening, run.at(opening.line)),
                    rank=r.rank,
                    line=opening.line,
                )
        fwd = r.first_typed(DdpForward)
        if fwd is None or fwd.steps > 0:
            return failed(
                msg(
                    "ddp.no_ddp_forward",
                    "Rank {rank} took its first optimizer step {where} without a forward pass "
                    "through the DDP model (calling the inner model skips DDP's gradient "
                    "averaging).",
                    rank=r.rank,
                    where=run.at(first.line),
                ),
                rank=r.rank,
                line=first.line,
            )
    if not any(r.typed(Step) for r in run.ranks):
        return run.not_reached(FIRST_STEP) or failed(
            msg(
                "ddp.never_trained",
                "No rank took an optimizer step, so the DDP model was never trained.",
            )
        )
    e = inits[0]
    return passed(
        msg(
            "ddp.wrapped_ok",
            "Every rank wrapped its {module} ({params} parameters) in DDP and trained through it.",
            module=e.module,
            params=e.params,
        )
    )


def _never_wrapped(missing: list[int]) -> Message:
    if len(missing) == 1:
        return msg(
            "ddp.never_wrapped_one",
            "Rank {rank} never wrapped a model in DistributedDataParallel, so nothing kept the "
            "ranks' gradients in step.",
            rank=missing[0],
        )
    return msg(
        "ddp.never_wrapped",
        "Ranks {first} and {last} never wrapped a model in DistributedDataParallel, so nothing "
        "kept the ranks' gradients in step.",
        first=", ".join(map(str, missing[:-1])),
        last=missing[-1],
    )


def _not_ddp_parameters(rank: int, opening: Step, where: str) -> Message:
    """An optimizer (by its first `step` record) that updates parameters outside the DDP model."""
    if opening.opt == 0:
        return msg(
            "ddp.optimizer_not_ddp",
            "Rank {rank}'s optimizer updates parameters that are not the DDP model's (first step "
            "{where}): build it from ddp_model.parameters() after wrapping.",
            rank=rank,
            where=where,
        )
    return msg(
        "ddp.nth_optimizer_not_ddp",
        "Rank {rank}'s {optimizer} (its optimizer #{number}) updates parameters that are not the "
        "DDP model's (first step {where}): build it from ddp_model.parameters() after wrapping.",
        rank=rank,
        optimizer=opening.optimizer or "optimizer",
        number=opening.opt + 1,
        where=where,
    )


def _steps_by_rank(run: RunView) -> dict[int, dict[tuple[int, int], Step]]:
    return {r.rank: {(e.opt, e.n): e for e in r.typed(Step)} for r in run.ranks}


@check(
    "ddp.in_sync",
    title="All ranks hold the same parameters after every step",
    hint="Every rank must start from the same weights and apply the same averaged gradient: wrap "
    "the model in DDP before training, and train only through the wrapper.",
)
def ddp_in_sync(run: RunView, params: dict[str, Any]) -> Outcome:
    steps = _steps_by_rank(run)
    if not any(steps.values()):
        return run.not_reached(FIRST_STEP) or failed(
            msg(
                "ddp.nothing_to_compare",
                "No rank took an optimizer step, so there was nothing to compare.",
            )
        )
    if run.world_size == 1:
        return passed(msg("ddp.one_rank", "Only one rank ran; there is nothing to keep in sync."))
    if local := _closure_losses_differ(run):
        return local
    ref = steps.get(0, {})
    compared = 0
    for key, rank, a, other in _paired_steps(ref, steps, run.world_size):
        compared += 1
        if _same(a, other):
            continue
        names = next((e.names for (o, n), e in ref.items() if o == key[0] and n == 1), None)
        where, va, vb = _first_difference(a.sums, other.sums, names or [])
        facts = {"step": key[1], "rank": rank, "other": vb, "ref": va}
        if where is None:  # equal sums (an update that moves values in opposite directions)
            where, va, vb = _first_difference(a.squares, other.squares, names or [])
            text = msg(
                "ddp.params_differ_squares",
                "After optimizer step {step}, rank {rank}'s parameters differ from rank 0's: "
                "the sum of squares of '{param}' is {other:.6g} on rank {rank} and {ref:.6g} on "
                "rank 0.",
                **{**facts, "other": vb, "ref": va, "param": where or ""},
            )
        else:
            text = msg(
                "ddp.params_differ",
                "After optimizer step {step}, rank {rank}'s parameters differ from rank 0's: "
                "the sum of '{param}' is {other:.6g} on rank {rank} and {ref:.6g} on rank 0.",
                **facts,
                param=where,
            )
        return failed(text, rank=rank, line=_line_of(steps[rank].get((key[0], 1))))
    if compared == 0:
        common = msg("ddp.reached_common_step", "the ranks took a step in common")
        if early := run.not_reached(common):
            return early
        return failed(
            msg(
                "ddp.no_common_step",
                "The ranks took no optimizer steps in common, so they could not be compared.",
            )
        )
    n = max(n for _, n in ref) if ref else 0
    return passed(
        msg(
            "ddp.in_sync_ok",
            "After each of the {n} optimizer steps, every rank held identical parameters.",
            n=n,
        )
    )


def _same(a: Step, b: Step) -> bool:
    """Equal parameters: the same digest, or the same sum and sum of squares in every tensor to
    float64 precision (bitwise noise only). The squares see what the sums cannot: an update that
    moves a tensor's values by opposite amounts (a two-class head under Adam) keeps its sum."""
    if a.digest == b.digest:
        return True
    return (
        _first_difference(a.sums, b.sums, [])[0] is None
        and _first_difference(a.squares, b.squares, [])[0] is None
    )


def _paired_steps(
    ref: dict[tuple[int, int], Step], steps: dict[int, dict[tuple[int, int], Step]], world: int
) -> list[tuple[tuple[int, int], int, Step, Step]]:
    """(key, rank, rank 0's step, rank's step) to compare. Ranks that took as many steps as rank
    0 (per optimizer) are compared step by step. When one took fewer, under `Join` (a rank that
    ran out of batches takes no step while the others finish the epoch, then DDP copies the
    final weights to it), its steps are matched in order to the other's: each must equal one of
    them, the next one after the last match; the first that equals none is paired with the step
    of the same number, to show the difference."""
    pairs: list[tuple[tuple[int, int], int, Step, Step]] = []
    for rank in range(1, world):
        mine = steps.get(rank, {})
        for opt in sorted({o for o, _ in ref} | {o for o, _ in mine}):
            a = [ref[k] for k in sorted(ref) if k[0] == opt]
            b = [mine[k] for k in sorted(mine) if k[0] == opt]
            if len(a) == len(b) or not a or not b:
                pairs += [((opt, x.n), rank, x, y) for x, y in zip(a, b, strict=False)]
                continue
            short, long_ = (b, a) if len(b) < len(a) else (a, b)
            i = 0
            for step in short:
                while i < len(long_) and not _same(long_[i], step):
                    i += 1
                if i == len(long_):
                    twin = next((x for x in long_ if x.n == step.n), long_[-1])
                    x, y = (twin, step) if short is b else (step, twin)
                    pairs.append(((opt, step.n), rank, x, y))
                    break
                x, y = (long_[i], step) if short is b else (step, long_[i])
                pairs.append(((opt, step.n), rank, x, y))
                i += 1
    return sorted(pairs, key=lambda item: (item[0][1], item[1]))


def _line_of(step: Step | None) -> int | None:
    return step.line if step is not None else None


def _closure_losses_differ(run: RunView) -> Outcome | None:
    """A line search (LBFGS, strong Wolfe) chooses the step length from the losses its closure
    returns: ranks that return their own loss can choose different steps and drift apart, even
    where this run's steps happened to agree."""
    by_rank = {r.rank: {e.call: e for e in r.typed(ClosureLoss)} for r in run.ranks}
    for call, e in sorted(by_rank.get(0, {}).items(), key=lambda item: item[0]):
        for rank, calls in sorted(by_rank.items()):
            other = calls.get(call)
            if rank == 0 or other is None:
                continue
            a, b = float(e.loss), float(other.loss)
            if abs(a - b) > SUM_TOLERANCE * max(1.0, abs(a), abs(b)):
                return failed(
                    msg(
                        "ddp.closure_losses_differ",
                        "At the optimizer step {where} the closure returned {other:.6g} on rank "
                        "{rank} and {ref:.6g} on rank 0: each rank returned the loss of its own "
                        "batch. The line search ({line_search}) chooses the step length from the "
                        "closure's loss, so the ranks can choose different steps and drift "
                        "apart. Return the loss averaged over the ranks: all_reduce a detached "
                        "copy and divide it by the world size.",
                        where=run.at(other.line),
                        other=b,
                        rank=rank,
                        ref=a,
                        line_search=e.line_search,
                    ),
                    rank=rank,
                    line=other.line,
                )
    return None


def _first_difference(
    a: list[float], b: list[float], names: list[str]
) -> tuple[str | None, float, float]:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if abs(x - y) > SUM_TOLERANCE * max(1.0, abs(x), abs(y)):
            name = names[i] if i < len(names) else msg("ddp.param_index", "parameter {i}", i=i)
            return name, x, y
    if len(a) != len(b):
        return msg("ddp.param_list", "the parameter list"), float(len(a)), float(len(b))
    return None, 0.0, 0.0


def _close(x: float, y: float) -> bool:
    return abs(x - y) <= 1e-4 * max(abs(x), abs(y), 1e-12)


@check(
    "ddp.grad_average",
    title="Gradients are averaged across ranks exactly once",
    hint="DDP already averages gradients during loss.backward(): do not all-reduce them again, "
    "and do not divide the loss by the world size.",
)
def ddp_grad_average(run: RunView, params: dict[str, Any]) -> Outcome:
    ranks0 = run.ranks[0] if run.ranks else None
    replays = ranks0.typed(Replay) if ranks0 else []
    first_step = ranks0.first_typed(Step) if ranks0 else None
    line = first_step.line if first_step else None
    if not run.typed(DdpInit):
        wrapped = msg("ddp.reached_model_wrapped", "the model was wrapped")
        return run.not_reached(wrapped) or skipped(
            msg(
                "ddp.no_model",
                "Not judged: no model was wrapped in DistributedDataParallel, so there is no "
                "first step of a DDP model to replay.",
            )
        )
    if not replays:
        replayed = msg("ddp.reached_replay", "rank 0's first step could be replayed")
        return run.not_reached(replayed) or failed(
            msg("ddp.no_replay", "Rank 0 did not report its first step.")
        )
    judged = [r for r in replays if r.status == "ok"]
    # A zero gradient everywhere cannot show whether it was averaged (the PyTorch DDP tutorial's
    # Linear(20, 1) under cross_entropy): judged on a later step with a gradient, else not judged.
    zero = [r.step for r in replays if r.status == "zero_gradient" and not r.norm_actual]
    if not judged:
        if zero:
            return skipped(zero_gradient(zero), rank=0, line=line)
        return skipped(
            msg(
                "ddp.not_replayed",
                "The first step could not be replayed: {reason}.",
                reason=replays[0].reason,
            )
        )
    for replay in judged:
        outcome = (
            _judge_first_step(run, replay, line)
            if replay.step == 1
            else judge_later_step(run, replay, line)
        )
        if outcome is not None:
            return with_zero_warning(outcome, zero)
    return with_zero_warning(averaged(run, judged), zero)


def _judge_first_step(run: RunView, replay: Replay, line: int | None) -> Outcome | None:
    """The first step, in detail: averaged by DDP, not summed again, not divided again, no loss
    scaled by one over the world size. None when it is right."""
    world = replay.world_size if replay.world_size is not None else run.world_size
    rel, ratio = float(replay.rel_error), float(replay.ratio)
    if rel > GRAD_TOLERANCE:
        return failed(
            msg(
                "ddp.not_averaged",
                "In your run, after backward in the first step, rank 0's gradient has norm "
                "{actual:.4g}; the average of the ranks' own gradients (replayed in one "
                "process) has norm {expected:.4g}: {why}.",
                actual=replay.norm_actual,
                expected=replay.norm_expected,
                why=why_not_averaged(world, ratio, rel, replay.worst_param),
            ),
            rank=0,
            line=line,
        )
    step = float(replay.step_ratio)
    if replay.step_parallel and step > 1.001:
        why = (
            msg(
                "ddp.why_summed_again",
                "the {world} ranks' gradients were summed once more (an all_reduce on top of DDP)",
                world=world,
            )
            if world > 1 and abs(step - world) < 1e-3 * world
            else msg("ddp.why_enlarged", "something enlarged them")
        )
        return failed(
            msg(
                "ddp.grew",
                "Between backward and the first optimizer step {where}, rank 0's gradients grew "
                "{step:.3g}×: {why}. DDP had already averaged them during backward.",
                where=run.at(line),
                step=step,
                why=why,
            ),
            rank=0,
            line=line,
        )
    if (
        world > 1
        and replay.step_parallel
        and not replay.clipped
        and not replay.amp_scale
        and abs(step * world - 1) < 1e-3
    ):
        return failed(
            msg(
                "ddp.divided_after_backward",
                "Between backward and the first optimizer step {where}, rank 0's gradients were "
                "divided by the world size ({world}) although DDP had already averaged them.",
                where=run.at(line),
                world=world,
            ),
            rank=0,
            line=line,
        )
    if world > 1:
        bad = _world_scaled_loss(replay, world)
        if bad is not None and _constant_across_world_sizes(run, bad[1] * bad[2]):
            bad = None  # the same factor at another world size: a constant, not a division
        if bad is not None:
            rank, scale, k = bad
            lines = replay.backward_lines.get(str(rank)) or []
            at = next((n for n in lines if n is not None), None) or line
            return failed(
                _world_scale_message(rank, scale, k, world, run.at(at)), rank=rank, line=at
            )
    return None


def _world_scale_message(rank: int, scale: float, k: int, world: int, where: str) -> Message:
    if k == 1:
        what = msg(
            "ddp.scale_one",
            "{scale:.4g} (= 1/{world}, one over the world size)",
            scale=scale,
            world=world,
        )
    else:
        what = msg(
            "ddp.scale_micro_steps",
            "{scale:.4g} over {k} accumulation micro-steps: 1/{k} averages those, and the extra "
            "1/{world} is one over the world size",
            scale=scale,
            k=k,
            world=world,
        )
    return msg(
        "ddp.world_scaled_loss",
        "Rank {rank} multiplied its loss by {what} before backward {where}. DDP already averages "
        "the gradients over the ranks, so each step was {world}× smaller than the gradient of "
        "the mean over the global batch.",
        rank=rank,
        what=what,
        where=where,
        world=world,
    )


def _world_scaled_loss(replay: Replay, world: int) -> tuple[int, float, int] | None:
    """A rank that scaled its loss by 1/world (or 1/(k*world) with k micro-steps) before backward.

    Evidence, per micro-step of the first step: its loss weight (`grader.harness.loss_weight`),
    else the gradient that reached the value a standard loss function returned (when exactly one
    was called), else the constant factor applied last to the tensor given to backward
    (`loss / world_size`).
    """
    micro = replay.micro_steps
    for rank_s, per_micro in sorted(replay.loss_scales.items()):
        scales = _micro_scales(replay, rank_s, per_micro)
        if scales is None:
            continue
        k = max(1, int(micro.get(rank_s, 1)))
        legit = (1.0, 1.0 / k)
        if all(any(_close(s, ok) for ok in legit) for s in scales):
            continue
        if all(_close(s * world, 1.0) or _close(s * world * k, 1.0) for s in scales):
            return int(rank_s), scales[0], k
    return None


def _micro_scales(replay: Replay, rank_s: str, per_micro: list[list[float]]) -> list[float] | None:
    """Each micro-step's factor on the loss: its loss weight (1 for a mean, however the loss was
    spelled), else the one standard loss's factor, else the constant applied last before
    backward (no standard loss, or several: 0.5 * a + 0.5 * b is the learner's business)."""
    weights = replay.loss_weights.get(rank_s) or []
    if weights and all(w is not None for w in weights):
        return [float(w) for w in weights if w is not None]
    roots = replay.root_scales.get(rank_s) or [None] * len(per_micro)
    scales = []
    for found, root in zip(per_micro, roots, strict=False):
        if isinstance(found, list) and len(found) == 1:
            scales.append(found[0])
        elif root is not None:
            scales.append(root)
    return scales if scales and len(scales) == len(per_micro) else None


def _constant_across_world_sizes(run: RunView, per_mean: float) -> bool:
    """Another world size's run applied the same factor to the mean over its global batch (e.g.
    0.5 * MSE at 1 and 2 ranks). Compared per mean, not per loss: a program that takes
    `steps // world_size` accumulation micro-steps and scales each loss by 1/steps is right at
    every size although its factor changes, and one that scales by 1/steps_in_total is wrong at
    2 ranks although its factor does not."""
    for other in run.siblings:
        if other.world_size == run.world_size or not other.ranks:
            continue
        replay = other.ranks[0].first_typed(Replay)
        if not replay or replay.status != "ok":
            continue
        found = _first_scale(replay)
        k = max(1, int(replay.micro_steps.get("0", 1)))
        if found is not None and _close(found * k, per_mean):
            return True
    return False


def _first_scale(replay: Replay) -> float | None:
    weights = replay.loss_weights.get("0") or []
    if weights and weights[0] is not None:
        return float(weights[0])
    per_micro = replay.loss_scales.get("0") or []
    roots = replay.root_scales.get("0") or []
    if per_micro and isinstance(per_micro[0], list) and len(per_micro[0]) == 1:
        return float(per_micro[0][0])
    if roots and roots[0] is not None:
        return float(roots[0])
    return None
