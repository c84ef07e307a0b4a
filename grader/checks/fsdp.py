"""Checks of `syncbn-sharded-state/fsdp-reshard`: a model sharded with FSDP2 (`fully_shard`),
saved with torch.distributed.checkpoint and resumed by the next launch at another world size
(`launch.resume`: each launch starts from the files the previous one left).

Evidence: the `FsdpState` snapshots of the fsdp hook (every rank's shards and optimizer state
before its first optimizer step, at each DCP save and at the end), the ckpt hook's `Save` and
`Load`, and rank 0's last DCP save read back in one process (`DcpReplay`).
"""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, skipped
from grader.events import DcpReplay, FsdpState, Load, Save
from grader.i18n import msg

TOLERANCE = 1e-4  # relative, on a parameter's sum over every rank's shard


def _states(run: RunView, when: str) -> dict[int, FsdpState]:
    """Each rank's snapshot: its first of `when` ("first_step"), its last ("save", "end")."""
    out: dict[int, FsdpState] = {}
    for rank, e in run.typed(FsdpState):
        if e.when == when and (when != "first_step" or rank not in out):
            out[rank] = e
    return out


def _totals(states: dict[int, FsdpState]) -> dict[str, tuple[float, float, float | None]]:
    """name -> (sum, sum of squares, optimizer-state sum or None) over every rank's shard."""
    totals: dict[str, list[Any]] = {}
    for e in states.values():
        for i, name in enumerate(e.names):
            entry = totals.setdefault(name, [0.0, 0.0, None])
            entry[0] += e.sums[i] if i < len(e.sums) else 0.0
            entry[1] += e.squares[i] if i < len(e.squares) else 0.0
            opt = e.opt_sums[i] if i < len(e.opt_sums) else None
            if opt is not None:
                entry[2] = (entry[2] or 0.0) + opt
    return {name: (v[0], v[1], v[2]) for name, v in totals.items()}


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def _saved(prev: RunView) -> tuple[dict[int, FsdpState], str]:
    """What the previous launch left: its last DCP save, else its state at the end."""
    saves = _states(prev, "save")
    return (saves, "save") if saves else (_states(prev, "end"), "end")


def _replay(run: RunView) -> DcpReplay | None:
    replays = [e for _, e in run.typed(DcpReplay)]
    return replays[-1] if replays else None


def fresh(run: RunView, fn: Any, params: dict[str, Any]) -> Outcome:
    """The first launch has nothing to resume: not judged, with the reason the launch that
    resumed from it gives when it is not judged either (the reason a learner can act on)."""
    after = next((s for s in run.siblings if s.resumed_from is run), None)
    if after is not None:
        outcome: Outcome = fn(after, params)
        if outcome.status == "skip":
            return outcome
    return skipped(msg("fsdp.fresh", "Not judged: this launch started without a checkpoint."))


def resumed_states(
    run: RunView, prev: RunView
) -> tuple[dict[int, FsdpState], dict[int, FsdpState], Outcome | None]:
    """(what `prev` saved, what `run` trained from at its first step), or why not judged."""
    saved, _ = _saved(prev)
    start = _states(run, "first_step")
    if not start:
        reached = msg("fsdp.reached_step", "its first optimizer step")
        return saved, start, run.not_reached(reached) or _no_fsdp(run)
    if not saved:
        return saved, start, _no_fsdp(prev)
    return saved, start, None


def _no_fsdp(run: RunView) -> Outcome:
    return run.not_reached(msg("fsdp.reached_model", "the model was sharded")) or failed(
        msg(
            "fsdp.no_fully_shard",
            "No rank trained a model sharded with fully_shard: apply fully_shard to each block, "
            "then to the whole model, before building the optimizer.",
        )
    )


@check(
    "fsdp.sharded",
    title="Every rank holds a 1/N shard of each parameter",
    hint="Apply fully_shard to each block and then to the whole model, before you build the "
    "optimizer: every parameter becomes a DTensor of which each rank holds one slice.",
)
def fsdp_sharded(run: RunView, params: dict[str, Any]) -> Outcome:
    states = _states(run, "first_step") or _states(run, "save") or _states(run, "end")
    if not states:
        return _no_fsdp(run)
    for rank, e in sorted(states.items()):
        plain = [name for name, dt in zip(e.names, e.dtensor, strict=False) if not dt]
        if plain:
            return failed(
                msg(
                    "fsdp.plain_tensor",
                    "On rank {rank} the parameter {name} is a plain tensor of {n} elements, not a "
                    "DTensor: its module was not sharded with fully_shard, so every rank keeps "
                    "all of it.",
                    rank=rank,
                    name=plain[0],
                    n=e.full[e.names.index(plain[0])],
                ),
                rank=rank,
            )
    world = run.world_size
    first = states[min(states)]
    for i, name in enumerate(first.names):
        full = first.full[i]
        whole = all(i < len(e.local) and e.local[i] == full for e in states.values())
        if world > 1 and full >= world and whole:
            return failed(
                msg(
                    "fsdp.replicated",
                    "Each of the {world} ranks holds all {n} elements of {name}: it is "
                    "replicated, not sharded.",
                    world=world,
                    n=full,
                    name=name,
                )
            )
    held = sum(first.local)
    total = sum(first.full)
    return passed(
        msg(
            "fsdp.sharded_ok",
            "All {n} parameters were DTensors sharded over the {world} ranks; rank {rank} held "
            "{held} of their {total} elements.",
            world=world,
            n=len(first.names),
            rank=min(states),
            held=held,
            total=total,
        )
    )


def _torch_saves(run: RunView) -> dict[int, Save]:
    """Each rank's first torch.save of a model's weights to a file."""
    out: dict[int, Save] = {}
    for rank, e in run.typed(Save):
        if e.ok and e.target in ("path", "file") and e.model_state and rank not in out:
            out[rank] = e
    return out


@check(
    "fsdp.own_shards",
    title="Every rank writes its own shards of the checkpoint",
    hint="Save with torch.distributed.checkpoint on every rank: dcp.save(state, "
    "checkpoint_id=folder) writes each rank's shards in parallel, and a .metadata file that "
    "lets a run at another world size read them back resharded.",
)
def fsdp_own_shards(run: RunView, params: dict[str, Any]) -> Outcome:
    dcp_saves: dict[int, Save] = {}
    for rank, e in run.typed(Save):
        if e.target == "dcp" and e.ok:
            dcp_saves.setdefault(rank, e)
    ranks = [r.rank for r in run.ranks]
    if not dcp_saves:
        pickled = _torch_saves(run)
        if not pickled:
            return run.not_reached(msg("fsdp.reached_save", "the checkpoint was saved")) or failed(
                msg("fsdp.no_save", "No rank saved a checkpoint of the model.")
            )
        rank, e = min(pickled.items())
        if len(pickled) == 1 and run.world_size > 1:
            idle = next(r for r in ranks if r not in pickled)
            return failed(
                msg(
                    "fsdp.rank0_saved",
                    "Only rank {rank} wrote the checkpoint ({path}, {where}) and rank {idle} "
                    "wrote nothing: the whole model was gathered into one process. With FSDP "
                    "every rank saves its own shards with dcp.save.",
                    rank=rank,
                    path=_short(e.path),
                    where=run.where(e.line),
                    idle=idle,
                ),
                rank=rank,
                line=e.line,
            )
        return failed(
            msg(
                "fsdp.torch_saved",
                "Rank {rank} saved the checkpoint with torch.save ({path}, {where}): a pickle of "
                "what that rank holds, which a run with another number of ranks cannot split "
                "differently. dcp.save also records where each shard lies in the whole "
                "parameter, so that dcp.load can reshard it.",
                rank=rank,
                path=_short(e.path),
                where=run.where(e.line),
            ),
            rank=rank,
            line=e.line,
        )
    missing = [r for r in ranks if r not in dcp_saves]
    first = dcp_saves[min(dcp_saves)]
    if missing:
        return failed(
            msg(
                "fsdp.not_every_rank",
                "Rank {rank} never called dcp.save, which rank {saver} called {where}: every "
                "rank writes its own shards, so every rank calls it.",
                rank=missing[0],
                saver=min(dcp_saves),
                where=run.where(first.line),
            ),
            rank=missing[0],
            line=first.line,
        )
    replay = _replay(run)
    if replay is None:
        return run.not_reached(msg("fsdp.reached_end", "the program ended")) or skipped(
            msg("fsdp.not_replayed", "Not judged: the checkpoint could not be read back.")
        )
    if replay.error:
        return failed(
            msg(
                "fsdp.unreadable",
                "The checkpoint saved {where} ({path}) could not be read back in one process: "
                "{error}",
                where=run.where(replay.line),
                path=_short(replay.path),
                error=replay.error,
            ),
            line=replay.line,
        )
    files = sorted(replay.files)
    if run.world_size > 1 and len(files) < run.world_size:
        return failed(
            msg(
                "fsdp.one_writer",
                "The checkpoint {path} holds its tensors in {n} file(s) ({files}) for {world} "
                "ranks: the ranks did not each write their own shards (was the state gathered "
                "before the save?).",
                path=_short(replay.path),
                n=len(files),
                files=", ".join(files[:4]),
                world=run.world_size,
            ),
            line=replay.line,
        )
    return passed(
        msg(
            "fsdp.own_shards_ok",
            "Each of the {world} ranks wrote its own shards with dcp.save {where}: {n} data "
            "files in {path} ({files}).",
            world=run.world_size,
            where=run.where(first.line),
            n=len(files),
            path=_short(replay.path),
            files=", ".join(files[:4]),
        ),
        line=first.line,
    )


def _short(path: str | None) -> str:
    if not path:
        return "?"
    return path.rsplit("/", 1)[-1] or path


def _first_line(states: dict[int, FsdpState]) -> int | None:
    return next((e.line for _, e in sorted(states.items()) if e.line), None)


@check(
    "fsdp.resumed_weights",
    title="The resumed run starts from the saved weights",
    hint="Before training, load the checkpoint on every rank with dcp.load(state, "
    "checkpoint_id=folder) into the sharded model's state dict (get_state_dict or a Stateful), "
    "then set_state_dict: each rank reads the slices of the saved shards it now owns.",
)
def fsdp_resumed_weights(run: RunView, params: dict[str, Any]) -> Outcome:
    prev = run.resumed_from
    if prev is None:
        return fresh(run, fsdp_resumed_weights, params)
    saved, start, not_judged = resumed_states(run, prev)
    if not_judged is not None:
        return not_judged
    replay = _replay(prev)
    ref = _totals(saved)
    if replay is not None and not replay.error:
        for name, (total, _, _) in ref.items():
            keys = [k for k in replay.tensors if k == name or k.endswith("." + name)]
            if keys and not any(_close(replay.tensors[k][1], total) for k in keys):
                return failed(
                    msg(
                        "fsdp.files_differ",
                        "Read back in one process, the checkpoint {path} holds {name} with sum "
                        "{got:.6g}, but the {world} ranks held {want:.6g} when they saved it.",
                        path=_short(replay.path),
                        name=name,
                        got=replay.tensors[keys[0]][1],
                        world=prev.world_size,
                        want=total,
                    ),
                    line=replay.line,
                )
    now = _totals(start)
    line = _first_line(start)
    loaded = any(e.ok and e.path for _, e in run.typed(Load))
    for name, (total, squares, _) in ref.items():
        got = now.get(name)
        if got is None or not (_close(got[0], total) and _close(got[1], squares)):
            why = (
                msg(
                    "fsdp.why_loaded",
                    "a checkpoint was read, but the model did not get its weights",
                )
                if loaded
                else msg("fsdp.why_not_loaded", "no rank loaded a checkpoint")
            )
            return failed(
                msg(
                    "fsdp.weights_differ",
                    "This run's first optimizer step {where} started from other weights than "
                    "the {prev} ranks saved: {name} sums to {got:.6g} over the {world} ranks' "
                    "shards, it was saved as {want:.6g} ({why}).",
                    where=run.where(line),
                    prev=prev.world_size,
                    name=name,
                    got=got[0] if got else 0.0,
                    world=run.world_size,
                    want=total,
                    why=why,
                ),
                line=line,
            )
    if replay is None or replay.error:
        return passed(
            msg(
                "fsdp.resumed_ok_plain",
                "All {world} ranks started from the {n} parameters the {prev} ranks saved.",
                world=run.world_size,
                n=len(ref),
                prev=prev.world_size,
            ),
            line=line,
        )
    return passed(
        msg(
            "fsdp.resumed_ok",
            "All {world} ranks started from the {n} parameters the {prev} ranks saved "
            "(resharded from {prev} to {world} shards; the checkpoint read back in one process "
            "holds the same values).",
            world=run.world_size,
            n=len(ref),
            prev=prev.world_size,
        ),
        line=line,
    )
