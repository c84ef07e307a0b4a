"""Checks of `syncbn-sharded-state/fsdp-reshard` on what a resumed launch continued: the
optimizer state and the step (the weights: `fsdp.resumed_weights` in grader/checks/fsdp.py)."""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, skipped
from grader.checks.fsdp import (
    _close,
    _first_line,
    _no_fsdp,
    _replay,
    _short,
    _states,
    _totals,
    fresh,
    resumed_states,
)
from grader.events import DcpReplay
from grader.i18n import msg


@check(
    "fsdp.optimizer_resumed",
    title="The optimizer state is resumed too",
    hint="Save the optimizer's state with the model's (get_state_dict(model, optimizer) gives "
    "both, sharded) and load both back before training: Adam's moments and step count are "
    "part of where training stopped.",
)
def fsdp_optimizer_resumed(run: RunView, params: dict[str, Any]) -> Outcome:
    prev = run.resumed_from
    if prev is None:
        return fresh(run, fsdp_optimizer_resumed, params)
    saved, start, not_judged = resumed_states(run, prev)
    if not_judged is not None:
        return not_judged
    ref, now = _totals(saved), _totals(start)
    line = _first_line(start)
    kept = {name: v[2] for name, v in ref.items() if v[2] is not None}
    if not kept:
        return passed(
            msg(
                "fsdp.no_optimizer_state",
                "The optimizer keeps no state between steps: there was none to resume.",
            )
        )
    optimizer = next((e.optimizer for e in start.values() if e.optimizer), "optimizer")
    # No state, or the zeros set_state_dict/get_state_dict create before filling it.
    if all(not now.get(name, (0.0, 0.0, None))[2] for name in kept):
        return failed(
            msg(
                "fsdp.optimizer_empty",
                "This run's {optimizer} took its first step {where} with a fresh state: what it "
                "had learnt in the {prev} ranks' run (its moments, its step count) was not "
                "restored, so it starts over as if training had just begun.",
                optimizer=optimizer,
                where=run.where(line),
                prev=prev.world_size,
            ),
            line=line,
        )
    for name, want in kept.items():
        got = now.get(name, (0.0, 0.0, None))[2]
        if got is None or not _close(got, want):
            return failed(
                msg(
                    "fsdp.optimizer_differs",
                    "This run's {optimizer} state for {name} at its first step {where} is not "
                    "the state the {prev} ranks saved (sum {got:.6g}, saved {want:.6g}).",
                    optimizer=optimizer,
                    name=name,
                    where=run.where(line),
                    prev=prev.world_size,
                    got=got if got is not None else 0.0,
                    want=want,
                ),
                line=line,
            )
    steps = [e.opt_step for e in start.values() if e.opt_step is not None]
    return passed(
        msg(
            "fsdp.optimizer_ok",
            "The {optimizer} state of all {n} parameters resumed as the {prev} ranks saved it{at}.",
            optimizer=optimizer,
            n=len(kept),
            prev=prev.world_size,
            at=msg("fsdp.at_step", " (at its step {step:.0f})", step=max(steps)) if steps else "",
        ),
        line=line,
    )


def _chain(run: RunView) -> list[RunView]:
    chain = [run]
    while chain[-1].resumed_from is not None:
        chain.append(chain[-1].resumed_from)
    return list(reversed(chain))


def _steps_at_save(run: RunView) -> int | None:
    saves = _states(run, "save")
    return saves[min(saves)].steps if saves else None


def _counter_key(replays: list[DcpReplay], first_steps: int) -> str | None:
    """The integer of the checkpoints that counts training: found by how it changes from save to
    save (a model's shape, `n_layer` or `vocab_size`, stays the same), then by its value in the
    first run's checkpoint (the steps it took, or one less: the last step's index). Without
    either, the first positive integer."""
    first = replays[0].counters
    keys = [k for k in first if all(k in r.counters for r in replays[1:])]
    changing = [k for k in keys if len({r.counters[k] for r in replays}) > 1]
    stepwise = [k for k in keys if abs(first[k] - first_steps) <= 1]
    for group in (
        [k for k in changing if k in stepwise],
        [k for k in changing if first[k] > 0],
        stepwise,
        [k for k in keys if first[k] > 0],
    ):
        if group:
            return group[0]
    return None


def _rate(first_value: int, first_steps: int) -> float:
    """How much the counter grows per optimizer step, from the uninterrupted first run: one per
    step when it saved the steps taken or the last step's index (`start = ckpt['step'] + 1` on
    resuming), else its value per step (an epoch counter)."""
    if abs(first_value - first_steps) <= 1:
        return 1.0
    return first_value / first_steps


@check(
    "fsdp.step_continues",
    title="Training continues from the saved step",
    hint="Save the step (or epoch) counter in the checkpoint with the model and optimizer, and "
    "start the resumed loop from the value you load: no step trained twice, none skipped.",
)
def fsdp_step_continues(run: RunView, params: dict[str, Any]) -> Outcome:
    prev = run.resumed_from
    if prev is None:
        return fresh(run, fsdp_step_continues, params)
    chain = _chain(run)
    first, before, now = chain[0], _replay(prev), _replay(run)
    if before is None or now is None or any(r.error or r.too_large for r in (before, now)):
        return run.not_reached(msg("fsdp.reached_end", "the program ended")) or skipped(
            msg(
                "fsdp.no_dcp_counter",
                "Not judged: no distributed checkpoint of both runs could be read back.",
            )
        )
    first_replay = _replay(first)
    first_steps, steps = _steps_at_save(first), _steps_at_save(run)
    if first_replay is None or not first_steps or steps is None:
        return _no_fsdp(run)
    key = _counter_key([first_replay, before, now], first_steps)
    if key is None:
        return failed(
            msg(
                "fsdp.no_counter",
                "The checkpoint {path} holds no step or epoch counter (an integer saved with "
                "the model): a resumed run cannot know where the saved one stopped.",
                path=_short(now.path),
            ),
            line=now.line,
        )
    rate = _rate(first_replay.counters[key], first_steps)  # counter per optimizer step
    a, b = before.counters[key], now.counters[key]
    expected = a + rate * steps
    if abs(b - expected) <= max(0.5, 0.01 * expected):
        return passed(
            msg(
                "fsdp.step_ok",
                "This run loaded {key} = {a} and, after its {steps} optimizer steps, saved "
                "{key} = {b}: it went on from where the {prev} ranks stopped.",
                key=key,
                a=a,
                steps=steps,
                b=b,
                prev=prev.world_size,
            ),
            line=now.line,
        )
    if b < expected:
        return failed(
            msg(
                "fsdp.trained_twice",
                "The {prev} ranks saved {key} = {a}; this run took {steps} optimizer steps and "
                "saved {key} = {b} {where}, not {want:.0f}: it counted from {start:.0f} again, "
                "so it trained steps the saved run had already trained.",
                prev=prev.world_size,
                key=key,
                a=a,
                steps=steps,
                b=b,
                where=run.where(now.line),
                want=expected,
                start=b - rate * steps,
            ),
            line=now.line,
        )
    return failed(
        msg(
            "fsdp.skipped_steps",
            "The {prev} ranks saved {key} = {a}; this run took {steps} optimizer steps and saved "
            "{key} = {b} {where}, not {want:.0f}: it skipped ahead of where the saved run stopped.",
            prev=prev.world_size,
            key=key,
            a=a,
            steps=steps,
            b=b,
            where=run.where(now.line),
            want=expected,
        ),
        line=now.line,
    )
