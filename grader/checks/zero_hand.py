"""Checks of `syncbn-sharded-state/zero-by-hand`: an optimizer sharded by hand (ZeRO stage 1).

Read from the `ShardedStep` events of `grader/harness/hooks/zero_hand.py`: every training step
against an unsharded optimizer of the same class stepped with the same gradients, the bytes of
optimizer state each rank keeps, and a digest of each rank's model after each step.
"""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, ranks_text
from grader.events import ShardedStep
from grader.i18n import msg

# Relative to the largest update of the step: the same arithmetic in another order (a flat
# buffer, a foreach kernel) differs by rounding only; a missing or wrong update by ~100%.
RELATIVE_TOLERANCE = 1e-3
ABSOLUTE_TOLERANCE = 1e-6
# State beyond the moments: a step counter per parameter (or per shard), a few bytes each.
SLACK_PER_PARAM = 16
# Together the ranks may keep this much more than one unsharded optimizer (padding of shards).
TOTAL_FACTOR = 1.1


def _steps(run: RunView) -> dict[int, list[ShardedStep]]:
    return {r.rank: r.typed(ShardedStep) for r in run.ranks}


def _missing(run: RunView, steps: dict[int, list[ShardedStep]]) -> Outcome | None:
    """A fail or skip when some rank has no judged step; None when every rank has one."""
    empty = sorted(rank for rank, found in steps.items() if not found)
    if not empty:
        return None
    if skip := run.not_reached(msg("zero.hand_steps", "its training steps")):
        return skip
    return failed(
        msg(
            "zero.no_sharded_steps",
            "No training step was seen on {ranks}: a step is a call of optimizer.step() after a "
            "forward through the DDP model. Keep the starter's DDP model and its training loop.",
            ranks=ranks_text(empty),
        ),
        rank=empty[0],
    )


def _broken(steps: dict[int, list[ShardedStep]]) -> Outcome | None:
    for rank, found in sorted(steps.items()):
        for e in found:
            if e.error:
                return failed(
                    msg(
                        "zero.no_reference",
                        "The grader could not take the same step with one unsharded {optimizer} "
                        "over the whole model ({error}). Keep the starter's torch.optim.Adam and "
                        "give it the parameters (or shards of them) and the learning rate only.",
                        optimizer=e.optimizer or "optimizer",
                        error=e.error,
                    ),
                    rank=rank,
                    line=e.line,
                )
    return None


def _other_optimizer(steps: dict[int, list[ShardedStep]], params: dict[str, Any]) -> Outcome | None:
    """A fail when the optimizer is not the one the exercise shards (params `optimizer`, `lr`):
    sharding must not change the optimizer, so the reference is the exercise's, not the
    program's."""
    want_class, want_lr = params.get("optimizer"), params.get("lr")
    for rank, found in sorted(steps.items()):
        e = found[0]
        same_lr = want_lr is None or (
            e.lr is not None and abs(e.lr - float(want_lr)) <= 1e-9 * max(1.0, abs(want_lr))
        )
        if (want_class is None or e.optimizer == want_class) and same_lr:
            continue
        return failed(
            msg(
                "zero.other_optimizer",
                "Rank {rank} stepped a {optimizer} with learning rate {lr}, where the unsharded "
                "optimizer is {want_optimizer} with learning rate {want_lr}: sharding the state "
                "must not change the optimizer or its hyperparameters, whatever share of the "
                "model each rank steps.",
                rank=rank,
                optimizer=e.optimizer,
                lr=e.lr,
                want_optimizer=want_class or e.optimizer,
                want_lr=want_lr if want_lr is not None else e.lr,
            ),
            rank=rank,
            line=e.line,
        )
    return None


@check(
    "zero.matches_unsharded",
    title="Every step gives what one unsharded optimizer gives",
    hint="Each rank steps the parameters it owns with the averaged gradients; then every "
    "parameter's new value must reach every rank (dist.broadcast from its owner, or an "
    "all-gather of the shards), before the next forward.",
)
def matches_unsharded(run: RunView, params: dict[str, Any]) -> Outcome:
    steps = _steps(run)
    if problem := _missing(run, steps) or _broken(steps):
        return problem
    if other := _other_optimizer(steps, params):
        return other
    worst: tuple[float, int, ShardedStep] | None = None
    for rank, found in sorted(steps.items()):
        for e in found:
            allowed = RELATIVE_TOLERANCE * e.update + ABSOLUTE_TOLERANCE
            if e.max_diff > allowed:
                cause = ""
                if e.unchanged:
                    cause = msg(
                        "zero.unchanged",
                        " {n} of the model's {total} parameters did not move at all on this rank "
                        "although the step moves them: their new values never reached it.",
                        n=e.unchanged,
                        total=e.n_params,
                    )
                return failed(
                    msg(
                        "zero.differs_from_unsharded",
                        "After step {n}, rank {rank}'s model differs from what one unsharded "
                        "{optimizer} gives with the same gradients: {param} is off by up to "
                        "{diff:.3g}, while the step moves parameters by up to {update:.3g}.{cause}",
                        n=e.n,
                        rank=rank,
                        optimizer=e.optimizer,
                        param=e.param,
                        diff=e.max_diff,
                        update=e.update,
                        cause=cause,
                    ),
                    rank=rank,
                    line=e.line,
                )
            if worst is None or e.max_diff > worst[0]:
                worst = (e.max_diff, rank, e)
    assert worst is not None  # every rank has steps (_missing)
    counts = sorted({len(found) for found in steps.values()})
    return passed(
        msg(
            "zero.matches_unsharded_ok",
            "All {n} steps on {ranks} equal one unsharded {optimizer}'s over the whole model "
            "(largest difference {diff:.2g}).",
            n=counts[-1],
            ranks=ranks_text(sorted(steps)),
            optimizer=worst[2].optimizer,
            diff=worst[0],
        )
    )


@check(
    "zero.state_sharded",
    title="Each rank keeps about 1/N of the optimizer state",
    hint="Build each rank's optimizer over the parameters (or the flat shard) it owns only: "
    "Adam keeps two moments per element it steps, so an optimizer over every parameter keeps "
    "the whole state on every rank.",
)
def state_sharded(run: RunView, params: dict[str, Any]) -> Outcome:
    steps = _steps(run)
    if problem := _missing(run, steps) or _broken(steps):
        return problem
    world = len(steps)
    last = {rank: found[-1] for rank, found in steps.items()}
    full = max(e.full_bytes for e in last.values())
    if full <= 0:
        return failed(msg("zero.no_state", "The optimizer kept no state: nothing was sharded."))
    some = last[min(last)]
    slack = SLACK_PER_PARAM * some.n_params
    bound = full / world + some.largest_bytes + slack
    for rank, e in sorted(last.items()):
        if e.state_bytes > bound:
            return failed(
                msg(
                    "zero.state_not_sharded",
                    "Rank {rank} keeps {kept} bytes of optimizer state, {share:.0%} of what one "
                    "unsharded {optimizer} over the whole model keeps ({full} bytes). Each of "
                    "the {world} ranks should keep about 1/{world} of it (here at most {bound} "
                    "bytes, one parameter's state more than an even share).",
                    rank=rank,
                    kept=e.state_bytes,
                    share=e.state_bytes / full,
                    optimizer=e.optimizer,
                    full=full,
                    world=world,
                    bound=int(bound),
                ),
                rank=rank,
                line=e.line,
            )
    total = sum(e.state_bytes for e in last.values())
    if total > TOTAL_FACTOR * full + slack * world:
        return failed(
            msg(
                "zero.state_repeated",
                "Together the {world} ranks keep {total} bytes of optimizer state, {times:.1f} "
                "times what one unsharded {optimizer} keeps ({full} bytes): the state of some "
                "parameters is kept on more than one rank.",
                world=world,
                total=total,
                times=total / full,
                optimizer=some.optimizer,
                full=full,
            )
        )
    shares = ", ".join(f"{last[r].state_bytes / full:.0%}" for r in sorted(last))
    return passed(
        msg(
            "zero.state_sharded_ok",
            "The ranks keep {shares} of one unsharded {optimizer}'s state ({full} bytes), "
            "{total} bytes together.",
            shares=shares,
            optimizer=some.optimizer,
            full=full,
            total=total,
        )
    )


@check(
    "zero.replicas_in_sync",
    title="Every rank has the same model after every step",
    hint="After each rank steps its own parameters, send every parameter from its owner to the "
    "other ranks (dist.broadcast(p, src=owner) or an all-gather of the shards).",
)
def replicas_in_sync(run: RunView, params: dict[str, Any]) -> Outcome:
    steps = _steps(run)
    if problem := _missing(run, steps):
        return problem
    first = min(steps)
    common = min(len(found) for found in steps.values())
    for i in range(common):
        reference = steps[first][i]
        apart = sorted(r for r, found in steps.items() if found[i].digest != reference.digest)
        if apart:
            return failed(
                msg(
                    "zero.replicas_differ",
                    "After step {n} the model on {ranks} differs from rank {first}'s: the "
                    "updated parameters did not reach every rank.",
                    n=reference.n,
                    ranks=ranks_text(apart),
                    first=first,
                ),
                rank=apart[0],
                line=steps[apart[0]][i].line,
            )
    return passed(
        msg(
            "zero.replicas_in_sync_ok",
            "After each of the {n} steps every rank had the same model.",
            n=common,
        )
    )
