"""Checks of `syncbn-sharded-state/zero-checkpoint`: ZeroRedundancyOptimizer and its checkpoint."""

from __future__ import annotations

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
)


@check(
    "zero.optimizer",
    title="Training uses ZeroRedundancyOptimizer",
    hint="opt = ZeroRedundancyOptimizer(ddp_model.parameters(), optimizer_class=torch.optim.Adam, "
    "lr=...) shards the optimizer state: each rank keeps the state of its own share of the "
    "parameters.",
)
def zero_optimizer(run: RunView, params: dict[str, Any]) -> Outcome:
    inits = {rank: e for rank, e in run.events("zero_init")}
    missing = [r.rank for r in run.ranks if r.rank not in inits]
    if missing:
        used = [e.get("optimizer") for _, e in run.events("step") if e.get("optimizer")]
        also = f" (it trained with {used[0]})" if used else ""
        return failed(
            f"{ranks_text(missing).capitalize()} never created a ZeroRedundancyOptimizer{also}.",
            rank=missing[0],
        )
    idle = [r.rank for r in run.ranks if not first_optimizer_steps(r.events)]
    if idle:
        return failed(
            f"{ranks_text(idle).capitalize()} never took an optimizer step.", rank=idle[0]
        )
    for r in run.ranks:
        # Which optimizer stepped the parameters: a ZeroRedundancyOptimizer that only exists
        # shards nothing, and the state it consolidates is empty.
        stepped = [e for e in r.of("step") if e.get("n") == 1]
        if not any(e.get("optimizer") == "ZeroRedundancyOptimizer" for e in stepped):
            made = inits[r.rank]
            other = stepped[0] if stepped else {}
            return failed(
                f"Rank {r.rank} created a ZeroRedundancyOptimizer {run.where(made.get('line'))} "
                "but never stepped it: the training steps were taken by a plain "
                f"{other.get('optimizer', 'optimizer')} {run.where(other.get('line'))}, which "
                "keeps the whole optimizer state on every rank, and the state the "
                "ZeroRedundancyOptimizer holds stays empty.",
                rank=r.rank,
                line=other.get("line"),
            )
    e = inits[0]
    return passed(
        f"Every rank trained with ZeroRedundancyOptimizer({e.get('optimizer')}) over "
        f"{plural(int(e.get('n_params', 0)), 'parameter')}; rank 0 held the state of "
        f"{e.get('n_local')} of them."
    )


def _saved_states(run: RunView) -> list[tuple[int, dict[str, Any]]]:
    return run.events("optimizer_state")


@check(
    "zero.consolidated",
    title="consolidate_state_dict runs on every rank before rank 0 saves",
    hint="consolidate_state_dict(to=0) is a collective: call it on EVERY rank (outside any "
    "`if rank == 0:`), then save optimizer.state_dict() on rank 0 only.",
)
def consolidated(run: RunView, params: dict[str, Any]) -> Outcome:
    enters = {r.rank: r.of("consolidate_enter") for r in run.ranks}
    exits = {r.rank: r.of("consolidate_exit") for r in run.ranks}
    called = sorted(r for r, e in enters.items() if e)
    absent = sorted(r for r, e in enters.items() if not e)
    if called and absent:
        rank = called[0]
        line = enters[rank][0].get("line")
        stuck = [r for r in called if not exits[r]]
        elsewhere = []
        for r in absent:
            rv = run.rank(r)
            assert rv is not None  # `absent` comes from run.ranks
            at = run.where(rv.last_line)
            if rv.ended_ok:
                elsewhere.append(f"rank {r} went on without it and finished (last seen {at})")
            else:
                elsewhere.append(f"rank {r} went on without it and was last seen {at}")
        finished = any(x.ended_ok for x in run.ranks if x.rank in absent)
        if run.timed_out:
            outcome = "so it hung there until the run was stopped"
        elif finished:
            outcome = (
                "so it waited there for partners that never came (a hang: here it ended when "
                "the other ranks finished and closed their connections)"
            )
        else:
            outcome = (
                "so it waited there for partners that never came (a hang, which the process "
                "group's timeout ended)"
            )
        return failed(
            f"consolidate_state_dict was called on {ranks_text(called)} only "
            f"{run.where(line)}; {ranks_text(absent)} never called it. It is a collective: "
            + (f"{ranks_text(stuck)} entered it and never returned, {outcome}; " if stuck else "")
            + "meanwhile "
            + "; ".join(elsewhere)
            + ".",
            rank=rank,
            line=line,
        )
    saves = [(r, e) for r, e in _saved_states(run) if r == 0] or _saved_states(run)
    failures = [(r, e) for r, e in run.events("zero_state_dict") if not e.get("ok")]
    if not called:
        if failures:
            rank, e = failures[0]
            return failed(
                f"Rank {rank} called optimizer.state_dict() {run.where(e.get('line'))} without "
                f"consolidating first: {e.get('error')}",
                rank=rank,
                line=e.get("line"),
            )
        if saves:
            rank, e = saves[0]
            return failed(
                f"No rank called consolidate_state_dict, so the optimizer state rank {rank} "
                f"saved {run.where(e.get('line'))} is only its own shard "
                f"({e.get('listed')} of {e.get('n_params')} parameters).",
                rank=rank,
                line=e.get("line"),
            )
        return failed("No rank called consolidate_state_dict, and no optimizer state was saved.")
    if not saves:
        first = enters[called[0]][0].get("line")
        return failed(
            f"Every rank called consolidate_state_dict {run.where(first)}, "
            "but no checkpoint with the optimizer state (a dict with 'state' and 'param_groups') "
            "was saved.",
            rank=0,
        )
    rank, save = saves[0]
    done = [e for e in exits.get(rank, []) if e.get("seq", 0) < save.get("seq", 0)]
    if not done:
        return failed(
            f"Rank {rank} saved the optimizer state {run.where(save.get('line'))} before "
            "consolidate_state_dict had finished on it.",
            rank=rank,
            line=save.get("line"),
        )
    for rank, save in saves:  # every checkpoint, against the live state when it was written
        if stale := _stale_message(run, rank, save, exits.get(rank, [])):
            return failed(stale, rank=rank, line=save.get("line"))
    return passed(
        f"All {len(run.ranks)} ranks called consolidate_state_dict "
        f"{run.where(done[-1].get('line'))} before rank {rank} saved the optimizer state "
        f"{run.where(save.get('line'))}."
    )


def _judged_saves(saves: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """Every optimizer state rank 0 saved (the one that holds the consolidated state), else every
    rank's."""
    return [(r, e) for r, e in saves if r == 0] or saves


def _stale_message(
    run: RunView, rank: int, save: dict[str, Any], exits: list[dict[str, Any]]
) -> str | None:
    live = save.get("live") or {}
    if not live.get("stale"):
        return None
    before = [e for e in exits if e.get("seq", 0) < save.get("seq", 0)]
    last = before[-1] if before else {}
    steps_text = ""
    if live.get("saved_step") is not None and live.get("live_step") is not None:
        steps_text = (
            f" (parameter {live.get('param')}: {live['saved_step']:.0f} steps in the saved "
            f"state, {live['live_step']:.0f} in the live optimizer)"
        )
    return (
        f"The optimizer state rank {rank} saved {run.where(save.get('line'))} is stale: it is "
        f"the state consolidated {run.where(last.get('line'))}, before later optimizer steps, "
        f"and for {live['stale']} of the {plural(int(live.get('compared', 0)), 'parameter')} "
        f"whose state rank {rank} holds, it differs from the live optimizer's{steps_text}. Call "
        "consolidate_state_dict(to=0) on every rank right before saving."
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
            "No checkpoint held an optimizer state (a dict with 'state' and 'param_groups')."
        )
    for rank, e in _judged_saves(saves):  # every checkpoint, not only the last
        listed, total = int(e.get("listed", 0)), int(e.get("n_params", 0))
        if listed < total:
            return failed(
                f"The optimizer state rank {rank} saved {run.where(e.get('line'))} covers "
                f"{listed} of the {total} parameters: a shard, not the whole state.",
                rank=rank,
                line=e.get("line"),
            )
    rank, e = saves[-1]
    total, stated = int(e.get("n_params", 0)), e.get("stated", 0)
    return passed(
        f"The optimizer state saved {run.where(e.get('line'))} lists all {total} parameters "
        f"({stated} with optimizer state)."
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
        return failed("No checkpoint held an optimizer state, so there was nothing to load.")
    for rank, e in _judged_saves(saves):
        if e.get("load_error"):
            return failed(
                f"The optimizer state saved {run.where(e.get('line'))} does not load into a fresh "
                f"optimizer over all the model's parameters: {e['load_error']}",
                rank=rank,
                line=e.get("line"),
            )
    rank, e = saves[-1]
    name = e.get("path") or "the checkpoint"
    short = name.rsplit("/", 1)[-1]
    return passed(
        f"{short} was read back and its optimizer state loaded into a fresh optimizer over all "
        f"{e.get('n_params')} parameters."
    )
