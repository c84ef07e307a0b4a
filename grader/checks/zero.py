"""Checks of `syncbn-sharded-state/zero-checkpoint`: ZeroRedundancyOptimizer and its checkpoint."""

from __future__ import annotations

from typing import Any

from grader.checks.base import (
    Outcome,
    RunView,
    check,
    failed,
    passed,
)
from grader.events import (
    ConsolidateEnter,
    ConsolidateExit,
    OptimizerState,
    Step,
    ZeroInit,
    ZeroStateDict,
)
from grader.i18n import Message, msg


def _parameters(n: int) -> Message:
    if n == 1:
        return msg("zero.one_parameter", "1 parameter")
    return msg("zero.parameters", "{n} parameters", n=n)


def _joined(parts: list[Message]) -> str:
    """Clauses joined with "; ", each translated (a list nests: head; tail)."""
    if not parts:
        return ""
    joined = parts[-1]
    for part in reversed(parts[:-1]):
        joined = msg("zero.join", "{head}; {tail}", head=part, tail=joined)
    return joined


@check(
    "zero.optimizer",
    title="Training uses ZeroRedundancyOptimizer",
    hint="opt = ZeroRedundancyOptimizer(ddp_model.parameters(), optimizer_class=torch.optim.Adam, "
    "lr=...) shards the optimizer state: each rank keeps the state of its own share of the "
    "parameters.",
)
def zero_optimizer(run: RunView, params: dict[str, Any]) -> Outcome:
    inits = {rank: e for rank, e in run.typed(ZeroInit)}
    missing = [r.rank for r in run.ranks if r.rank not in inits]
    if missing:
        used = [e.optimizer for _, e in run.typed(Step) if e.optimizer]
        also = (
            msg("zero.trained_with", " (it trained with {optimizer})", optimizer=used[0])
            if used
            else ""
        )
        if len(missing) == 1:
            text = msg(
                "zero.never_created_one",
                "Rank {rank} never created a ZeroRedundancyOptimizer{also}.",
                rank=missing[0],
                also=also,
            )
        else:
            text = msg(
                "zero.never_created_many",
                "Ranks {first} and {last} never created a ZeroRedundancyOptimizer{also}.",
                first=", ".join(map(str, missing[:-1])),
                last=missing[-1],
                also=also,
            )
        return failed(text, rank=missing[0])
    idle = [r.rank for r in run.ranks if not r.typed(Step)]
    if idle:
        if len(idle) == 1:
            text = msg(
                "zero.never_stepped_one", "Rank {rank} never took an optimizer step.", rank=idle[0]
            )
        else:
            text = msg(
                "zero.never_stepped_many",
                "Ranks {first} and {last} never took an optimizer step.",
                first=", ".join(map(str, idle[:-1])),
                last=idle[-1],
            )
        return failed(text, rank=idle[0])
    for r in run.ranks:
        # Which optimizer stepped the parameters: a ZeroRedundancyOptimizer that only exists
        # shards nothing, and the state it consolidates is empty.
        stepped = [e for e in r.typed(Step) if e.n == 1]
        if not any(e.optimizer == "ZeroRedundancyOptimizer" for e in stepped):
            made = inits[r.rank]
            other = stepped[0] if stepped else None
            line = other.line if other else None
            return failed(
                msg(
                    "zero.plain_stepped",
                    "Rank {rank} created a ZeroRedundancyOptimizer {made} but never stepped it: "
                    "the training steps were taken by a plain {optimizer} {stepped}, which keeps "
                    "the whole optimizer state on every rank, and the state the "
                    "ZeroRedundancyOptimizer holds stays empty.",
                    rank=r.rank,
                    made=run.where(made.line),
                    optimizer=(other.optimizer if other else None)
                    or msg("zero.an_optimizer", "optimizer"),
                    stepped=run.where(line),
                ),
                rank=r.rank,
                line=line,
            )
    e = inits[0]
    return passed(
        msg(
            "zero.optimizer_ok",
            "Every rank trained with ZeroRedundancyOptimizer({optimizer}) over {parameters}; "
            "rank 0 held the state of {local} of them.",
            optimizer=e.optimizer,
            parameters=_parameters(e.n_params),
            local=e.n_local,
        )
    )


def _saved_states(run: RunView) -> list[tuple[int, OptimizerState]]:
    return run.typed(OptimizerState)


def _on_ranks(ranks: list[int]) -> Message:
    """'rank 0' / 'ranks 0 and 1' after "called on" (translated with the preposition)."""
    if len(ranks) == 1:
        return msg("zero.on_rank", "rank {rank}", rank=ranks[0])
    return msg(
        "zero.on_ranks",
        "ranks {first} and {last}",
        first=", ".join(map(str, ranks[:-1])),
        last=ranks[-1],
    )


def _never_called(ranks: list[int]) -> Message:
    if len(ranks) == 1:
        return msg("zero.never_called_one", "rank {rank} never called it", rank=ranks[0])
    return msg(
        "zero.never_called_many",
        "ranks {first} and {last} never called it",
        first=", ".join(map(str, ranks[:-1])),
        last=ranks[-1],
    )


def _stuck(ranks: list[int], outcome: Message) -> str:
    """'rank 0 entered it and never returned, <outcome>; ' or "" when no rank did."""
    if not ranks:
        return ""
    if len(ranks) == 1:
        return msg(
            "zero.stuck_one",
            "rank {rank} entered it and never returned, {outcome}; ",
            rank=ranks[0],
            outcome=outcome,
        )
    return msg(
        "zero.stuck_many",
        "ranks {first} and {last} entered it and never returned, {outcome}; ",
        first=", ".join(map(str, ranks[:-1])),
        last=ranks[-1],
        outcome=outcome,
    )


def _one_sided(
    run: RunView,
    called: list[int],
    absent: list[int],
    enters: dict[int, list[ConsolidateEnter]],
    exits: dict[int, list[ConsolidateExit]],
) -> Outcome:
    """consolidate_state_dict called on some ranks only: who waited, who went on."""
    rank = called[0]
    line = enters[rank][0].line
    stuck = [r for r in called if not exits[r]]
    elsewhere: list[Message] = []
    for r in absent:
        rv = run.rank(r)
        assert rv is not None  # `absent` comes from run.ranks
        at = run.where(rv.last_line)
        if rv.ended_ok:
            elsewhere.append(
                msg(
                    "zero.went_on_finished",
                    "rank {rank} went on without it and finished (last seen {at})",
                    rank=r,
                    at=at,
                )
            )
        else:
            elsewhere.append(
                msg(
                    "zero.went_on",
                    "rank {rank} went on without it and was last seen {at}",
                    rank=r,
                    at=at,
                )
            )
    finished = any(x.ended_ok for x in run.ranks if x.rank in absent)
    if run.timed_out:
        outcome = msg("zero.hung", "so it hung there until the run was stopped")
    elif finished:
        outcome = msg(
            "zero.hung_until_others_ended",
            "so it waited there for partners that never came (a hang: here it ended when the "
            "other ranks finished and closed their connections)",
        )
    else:
        outcome = msg(
            "zero.hung_until_timeout",
            "so it waited there for partners that never came (a hang, which the process "
            "group's timeout ended)",
        )
    return failed(
        msg(
            "zero.one_sided",
            "consolidate_state_dict was called on {called} only {where}; {absent}. It is a "
            "collective: {stuck}meanwhile {elsewhere}.",
            called=_on_ranks(called),
            where=run.where(line),
            absent=_never_called(absent),
            stuck=_stuck(stuck, outcome),
            elsewhere=_joined(elsewhere),
        ),
        rank=rank,
        line=line,
    )


@check(
    "zero.consolidated",
    title="consolidate_state_dict runs on every rank before rank 0 saves",
    hint="consolidate_state_dict(to=0) is a collective: call it on EVERY rank (outside any "
    "`if rank == 0:`), then save optimizer.state_dict() on rank 0 only.",
)
def consolidated(run: RunView, params: dict[str, Any]) -> Outcome:
    enters = {r.rank: r.typed(ConsolidateEnter) for r in run.ranks}
    exits = {r.rank: r.typed(ConsolidateExit) for r in run.ranks}
    called = sorted(r for r, e in enters.items() if e)
    absent = sorted(r for r, e in enters.items() if not e)
    if called and absent:
        return _one_sided(run, called, absent, enters, exits)
    saves = [(r, e) for r, e in _saved_states(run) if r == 0] or _saved_states(run)
    failures = [(r, e) for r, e in run.typed(ZeroStateDict) if not e.ok]
    if not called:
        if failures:
            rank, e = failures[0]
            return failed(
                msg(
                    "zero.state_dict_unconsolidated",
                    "Rank {rank} called optimizer.state_dict() {where} without consolidating "
                    "first: {error}",
                    rank=rank,
                    where=run.where(e.line),
                    error=e.error,
                ),
                rank=rank,
                line=e.line,
            )
        if saves:
            rank, save = saves[0]
            return failed(
                msg(
                    "zero.saved_own_shard",
                    "No rank called consolidate_state_dict, so the optimizer state rank {rank} "
                    "saved {where} is only its own shard ({listed} of {total} parameters).",
                    rank=rank,
                    where=run.where(save.line),
                    listed=save.listed,
                    total=save.n_params,
                ),
                rank=rank,
                line=save.line,
            )
        return failed(
            msg(
                "zero.nothing",
                "No rank called consolidate_state_dict, and no optimizer state was saved.",
            )
        )
    if not saves:
        first = enters[called[0]][0].line
        return failed(
            msg(
                "zero.not_saved",
                "Every rank called consolidate_state_dict {where}, but no checkpoint with the "
                "optimizer state (a dict with 'state' and 'param_groups') was saved.",
                where=run.where(first),
            ),
            rank=0,
        )
    rank, save = saves[0]
    done = [e for e in exits.get(rank, []) if e.seq < save.seq]
    if not done:
        return failed(
            msg(
                "zero.saved_early",
                "Rank {rank} saved the optimizer state {where} before consolidate_state_dict had "
                "finished on it.",
                rank=rank,
                where=run.where(save.line),
            ),
            rank=rank,
            line=save.line,
        )
    for rank, save in saves:  # every checkpoint, against the live state when it was written
        if stale := _stale_message(run, rank, save, exits.get(rank, [])):
            return failed(stale, rank=rank, line=save.line)
    return passed(
        msg(
            "zero.consolidated_ok",
            "All {n} ranks called consolidate_state_dict {consolidated} before rank {rank} saved "
            "the optimizer state {saved}.",
            n=len(run.ranks),
            consolidated=run.where(done[-1].line),
            rank=rank,
            saved=run.where(save.line),
        )
    )


def _judged_saves(saves: list[tuple[int, OptimizerState]]) -> list[tuple[int, OptimizerState]]:
    """Every optimizer state rank 0 saved (the one that holds the consolidated state), else every
    rank's."""
    return [(r, e) for r, e in saves if r == 0] or saves


def _stale_message(
    run: RunView, rank: int, save: OptimizerState, exits: list[ConsolidateExit]
) -> Message | None:
    live = save.live
    if not live.get("stale"):
        return None
    before = [e for e in exits if e.seq < save.seq]
    last_line = before[-1].line if before else None
    steps: str = ""
    saved_step, live_step = live.get("saved_step"), live.get("live_step")
    if saved_step is not None and live_step is not None:
        steps = msg(
            "zero.stale_steps",
            " (parameter {param}: {saved:.0f} steps in the saved state, {live:.0f} in the live "
            "optimizer)",
            param=live.get("param"),
            saved=saved_step,
            live=live_step,
        )
    return msg(
        "zero.stale",
        "The optimizer state rank {rank} saved {where} is stale: it is the state consolidated "
        "{consolidated}, before later optimizer steps, and for {stale} of the {compared} whose "
        "state rank {rank} holds, it differs from the live optimizer's{steps}. Call "
        "consolidate_state_dict(to=0) on every rank right before saving.",
        rank=rank,
        where=run.where(save.line),
        consolidated=run.where(last_line),
        stale=live.get("stale"),
        compared=_parameters(int(live.get("compared", 0))),
        steps=steps,
    )


@check(
    "zero.state_complete",
    title="The saved optimizer state covers every parameter",
    hint="After consolidate_state_dict(to=0), optimizer.state_dict() on rank 0 is the full state; "
    "optimizer.optim.state_dict() is only this rank's shard.",
)
def state_complete(run: RunView, params: dict[str, Any]) -> Outcome:
    saves = _saved_states(run)
    if not saves:
        return failed(
            msg(
                "zero.no_state_saved",
                "No checkpoint held an optimizer state (a dict with 'state' and 'param_groups').",
            )
        )
    for rank, e in _judged_saves(saves):  # every checkpoint, not only the last
        if e.listed < e.n_params:
            return failed(
                msg(
                    "zero.shard_saved",
                    "The optimizer state rank {rank} saved {where} covers {listed} of the "
                    "{total} parameters: a shard, not the whole state.",
                    rank=rank,
                    where=run.where(e.line),
                    listed=e.listed,
                    total=e.n_params,
                ),
                rank=rank,
                line=e.line,
            )
    rank, e = saves[-1]
    return passed(
        msg(
            "zero.state_complete_ok",
            "The optimizer state saved {where} lists all {total} parameters ({stated} with "
            "optimizer state).",
            where=run.where(e.line),
            total=e.n_params,
            stated=e.stated,
        )
    )


@check(
    "zero.loadable",
    title="The saved optimizer state loads back",
    hint="Save exactly what optimizer.state_dict() returns (after consolidating); it then loads "
    "into a fresh optimizer of the same kind with load_state_dict.",
)
def loadable(run: RunView, params: dict[str, Any]) -> Outcome:
    saves = _saved_states(run)
    if not saves:
        return failed(
            msg(
                "zero.nothing_to_load",
                "No checkpoint held an optimizer state, so there was nothing to load.",
            )
        )
    for rank, e in _judged_saves(saves):
        if e.load_error:
            return failed(
                msg(
                    "zero.does_not_load",
                    "The optimizer state saved {where} does not load into a fresh optimizer over "
                    "all the model's parameters: {error}",
                    where=run.where(e.line),
                    error=e.load_error,
                ),
                rank=rank,
                line=e.line,
            )
    rank, e = saves[-1]
    if e.path:
        return passed(
            msg(
                "zero.loaded",
                "{file} was read back and its optimizer state loaded into a fresh optimizer over "
                "all {n} parameters.",
                file=e.path.rsplit("/", 1)[-1],
                n=e.n_params,
            )
        )
    return passed(
        msg(
            "zero.loaded_unnamed",
            "The checkpoint was read back and its optimizer state loaded into a fresh optimizer "
            "over all {n} parameters.",
            n=e.n_params,
        )
    )
