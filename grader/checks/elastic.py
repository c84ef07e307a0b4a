"""Checks of `torchrun-launch/elastic-resume`: snapshot, injected failure, restart, resume.

The grader launches the program twice: once with an injected failure (a rank exits mid-training
on the first attempt; torchrun restarts every rank, `--max-restarts=1`) and once uninterrupted,
the reference. On CPU with gloo and one thread per rank, training is deterministic, so a correct
resume ends with bitwise the same weights as the reference (measured here); the tolerance only
absorbs a different summation order, far below one SGD step's change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from grader.checks.base import (
    Outcome,
    RankView,
    RunView,
    check,
    failed,
    first_optimizer,
    get_check,
    passed,
    ranks_text,
)
from grader.events import E, Fault, Load, Rename, Save, Step
from grader.i18n import Message, msg

REL_TOL = 1e-6


def _of(r: RankView, kind: type[E], attempt: int) -> list[E]:
    """This rank's records of one kind in one attempt (torchelastic restart), typed."""
    return [e for e in r.typed(kind) if e.attempt == attempt]


def _fault(run: RunView) -> tuple[int, Fault] | None:
    """(rank, record) of the injected failure."""
    found = run.typed(Fault)
    return found[0] if found else None


def _saved_paths(run: RunView, attempt: int) -> set[str]:
    paths: set[str] = set()
    for r in run.ranks:
        for save in _of(r, Save, attempt):
            if save.ok is not False and save.path:
                paths.add(str(save.path))
        for rename in _of(r, Rename, attempt):
            if rename.dst:
                paths.add(str(rename.dst))
    return paths


def resumed_from_snapshot(run: RunView) -> bool:
    """Whether the restarted attempt loaded a snapshot saved before the injected failure: the
    premise of `elastic.equivalent` (a program that trains again from scratch ends where an
    uninterrupted run ends too, since training is deterministic here)."""
    found = _fault(run)
    if found is None:
        return False
    attempt = found[1].attempt
    saved = _saved_paths(run, attempt)
    return any(
        load.ok is not False and str(load.path) in saved
        for r in run.ranks
        for load in _of(r, Load, attempt + 1)
    )


def _steps(n: int) -> Message:
    if n == 1:
        return msg("elastic.one_step", "1 step")
    return msg("elastic.steps", "{n} steps", n=n)


def _optimizer_steps(n: int) -> Message:
    if n == 1:
        return msg("elastic.one_optimizer_step", "1 optimizer step")
    return msg("elastic.optimizer_steps", "{n} optimizer steps", n=n)


def _no_fault_message(run: RunView) -> Message:
    planned = (run.faults or [{}])[0]
    rank = int(planned.get("rank", 1))
    view = run.rank(rank)
    n = len(view.typed(Step)) if view is not None else 0
    return msg(
        "elastic.fault_never_fired",
        "The grader's injected failure never fired: it was to stop rank {rank} after its "
        "optimizer step {after}, as placed from an uninterrupted run of your program "
        "({reference_steps}), but this time rank {rank} took {steps} in all. Does the amount of "
        "training depend on something other than the data, such as the clock or a random draw?",
        rank=rank,
        after=planned.get("after_steps"),
        reference_steps=_steps(int(planned.get("reference_steps", 0))),
        steps=_optimizer_steps(n),
    )


def _stopped(fe: Fault, frank: int) -> Message:
    return msg(
        "elastic.stopped",
        "Rank {rank} was stopped after its optimizer step {after}",
        rank=frank,
        after=int(fe.after_steps),
    )


def _nothing_saved(fe: Fault, frank: int) -> Message:
    """Why no snapshot existed when the rank was stopped, from where the fault was placed."""
    total = _optimizer_steps(int(fe.reference_steps))
    how = msg(
        "elastic.how_to_save",
        "Save the training state (model, optimizer, and where to continue) from rank 0 as "
        "training goes, e.g. at the end of every epoch.",
    )
    if fe.placed == "no_snapshot":
        return msg(
            "elastic.never_saved",
            "Your program never saved a snapshot of the model in an uninterrupted run ({total} "
            "on rank {rank}), so the grader stopped rank {rank} halfway, after its optimizer "
            "step {after}, and the restart had nothing to resume from. {how}",
            total=total,
            rank=frank,
            after=fe.after_steps,
            how=how,
        )
    if fe.placed == "late_snapshot":
        return msg(
            "elastic.saved_late",
            "In an uninterrupted run your program saved its first snapshot only after its last "
            "optimizer step ({total}), so a failure during training always loses all of it: the "
            "grader stopped rank {rank} halfway, after its optimizer step {after}, and the "
            "restart had nothing to resume from. {how}",
            total=total,
            rank=frank,
            after=fe.after_steps,
            how=how,
        )
    return msg(
        "elastic.not_saved_yet",
        "{stopped}, one step after an uninterrupted run had completely written its first "
        "snapshot (after step {snapshot_step}), but in this run no snapshot had been saved by "
        "then, so the restart had nothing to resume from. {how}",
        stopped=_stopped(fe, frank),
        snapshot_step=fe.snapshot_step,
        how=how,
    )


@check(
    "elastic.resumed",
    title="After the restart, every rank resumes from the snapshot",
    hint="At start-up, if the snapshot file exists, load it on every rank (model, optimizer and "
    "the epoch to continue from) before wrapping the model in DDP; save it from rank 0 at the "
    "end of every epoch.",
)
def resumed(run: RunView, params: dict[str, Any]) -> Outcome:
    found = _fault(run)
    if found is None:
        return failed(_no_fault_message(run))
    frank, fe = found
    attempt = fe.attempt
    restarted = [r for r in run.ranks if attempt + 1 in r.attempts]
    if not restarted:
        return failed(
            msg(
                "elastic.not_restarted",
                "{stopped} and the job was not restarted.",
                stopped=_stopped(fe, frank),
            )
        )
    saved = _saved_paths(run, attempt)
    if not saved:
        return failed(_nothing_saved(fe, frank), rank=frank)
    not_loaded = []
    for r in run.ranks:
        loads = [
            load
            for load in _of(r, Load, attempt + 1)
            if load.ok is not False and str(load.path) in saved
        ]
        if not loads:
            not_loaded.append(r.rank)
    if not_loaded:
        facts = {
            "ranks": ranks_text(not_loaded),
            "files": ", ".join(sorted(p.rsplit("/", 1)[-1] for p in saved)),
        }
        return failed(
            msg(
                "elastic.not_loaded_one",
                "After the restart, {ranks} did not load the snapshot ({files}) saved before the "
                "failure, so it started again from scratch.",
                **facts,
            )
            if len(not_loaded) == 1
            else msg(
                "elastic.not_loaded",
                "After the restart, {ranks} did not load the snapshot ({files}) saved before the "
                "failure, so they started again from scratch.",
                **facts,
            ),
            rank=not_loaded[0],
        )
    ref = run.reference
    for r in run.ranks:
        # The same terms on both sides: this rank's steps, every optimizer's, in each run.
        twin = ref.rank(r.rank) if ref is not None else None
        total = len(twin.typed(Step)) if twin is not None else 0
        again = len(_of(r, Step, attempt + 1))
        if total and again >= total:
            return failed(
                msg(
                    "elastic.started_over",
                    "After the restart rank {rank} loaded the snapshot but took {steps}, as many "
                    "as an uninterrupted run ({total}): it started over from the beginning "
                    "instead of where the snapshot was taken.",
                    rank=r.rank,
                    steps=_optimizer_steps(again),
                    total=total,
                ),
                rank=r.rank,
            )
    r0 = run.ranks[0]
    load = next(e for e in _of(r0, Load, attempt + 1) if str(e.path) in saved)
    more = len(_of(r0, Step, attempt + 1))
    return passed(
        msg(
            "elastic.resumed_ok",
            "{stopped}; after the restart every rank loaded the snapshot {where} and continued "
            "with {more}.",
            stopped=_stopped(fe, frank),
            where=run.where(load.line),
            more=(
                msg("elastic.one_more_step", "1 more optimizer step")
                if more == 1
                else msg("elastic.more_steps", "{n} more optimizer steps", n=more)
            ),
        )
    )


@check(
    "elastic.equivalent",
    title="The resumed run ends where an uninterrupted run ends",
    hint="Resume exactly where the snapshot was taken: restore the model AND the optimizer state "
    "(momentum, Adam moments), continue from the epoch after the saved one, and call "
    "sampler.set_epoch(epoch) so every epoch sees the same data order as before.",
)
def equivalent(run: RunView, params: dict[str, Any]) -> Outcome:
    tol = float(params.get("tolerance", REL_TOL))
    found = _fault(run)
    if found is None:
        return failed(_no_fault_message(run))
    ref = run.reference
    if ref is None or not ref.ranks:
        return failed(
            msg("elastic.no_reference", "The uninterrupted reference run did not take place.")
        )
    ref_steps = first_optimizer(ref.ranks[0].typed(Step))
    if not ref_steps or ref.ranks[0].end is None:
        return failed(
            msg(
                "elastic.reference_unfinished",
                "The uninterrupted run of your program did not finish, so there is nothing to "
                "compare with (see the other checks).",
            )
        )
    last = run.ranks[0].last_attempt
    got = first_optimizer(run.ranks[0].typed_in_attempt(last, Step))
    if not got:
        return failed(
            msg("elastic.no_step_after", "After the restart rank 0 took no optimizer step."),
            rank=0,
        )
    a, b = got[-1], ref_steps[-1]
    if a.digest == b.digest:
        return passed(
            msg(
                "elastic.bitwise",
                "After the failure and the restart, rank 0's final weights are bitwise identical "
                "to those of an uninterrupted run ({steps}).",
                steps=_steps(len(ref_steps)),
            )
        )
    sa, sb = a.sums, b.sums
    names = b.names or ref_steps[0].names or []
    worst, where_i, stat_of = 0.0, 0, "sums"
    for stat in ("sums", "squares"):  # the sum of squares sees what sums cannot
        pairs = zip(_stat(a, stat), _stat(b, stat), strict=False)
        for i, (x, y) in enumerate(pairs):
            rel = abs(x - y) / max(abs(x), abs(y), 1e-12)
            if rel > worst:
                worst, where_i, stat_of = rel, i, stat
                sa, sb = _stat(a, stat), _stat(b, stat)
    if worst <= tol and len(sa) == len(sb):
        return passed(
            msg(
                "elastic.within_tolerance",
                "After the failure and the restart, rank 0's final weights match an "
                "uninterrupted run within {worst:.1e} (relative), not bitwise.",
                worst=worst,
            )
        )
    before = _steps_before_snapshot(run)
    done = (before or 0) + len(got)
    facts = {
        "after": int(found[1].after_steps),
        "what": (
            msg("elastic.stat_sum", "sum")
            if stat_of == "sums"
            else msg("elastic.stat_squares", "sum of squares")
        ),
        "name": (
            names[where_i]
            if where_i < len(names)
            else msg("elastic.parameter_n", "parameter {i}", i=where_i)
        ),
        "got": sa[where_i],
        "want": sb[where_i],
        "worst": worst,
    }
    if before is not None and done != len(ref_steps):
        return failed(
            msg(
                "elastic.differs_counted",
                "After the failure (after step {after}) and the restart, rank 0's final weights "
                "differ from an uninterrupted run's: the {what} of {name} is {got:.6g} instead "
                "of {want:.6g} (relative difference {worst:.1e}). Counting steps: {before} "
                "before the snapshot + {resumed} after the restart = {done}, but an "
                "uninterrupted run takes {total}: {verdict}",
                before=before,
                resumed=len(got),
                done=done,
                total=len(ref_steps),
                verdict=(
                    msg("elastic.trained_twice", "an epoch was trained twice.")
                    if done > len(ref_steps)
                    else msg("elastic.skipped_training", "training was skipped.")
                ),
                **facts,
            ),
            rank=0,
        )
    return failed(
        msg(
            "elastic.differs",
            "After the failure (after step {after}) and the restart, rank 0's final weights "
            "differ from an uninterrupted run's: the {what} of {name} is {got:.6g} instead of "
            "{want:.6g} (relative difference {worst:.1e}).",
            **facts,
        ),
        rank=0,
    )


def _stat(step: Step, stat: str) -> list[float]:
    """A step's per-tensor `sums` or `squares`."""
    return step.sums if stat == "sums" else step.squares


def _steps_before_snapshot(run: RunView) -> int | None:
    """Rank 0's optimizer steps before the last snapshot it saved (or renamed into place) in the
    first attempt; a rank's records are in order of `seq`."""
    r0 = run.ranks[0]
    snapshots = [e.seq for e in _of(r0, Save, 0)] + [e.seq for e in _of(r0, Rename, 0)]
    if not snapshots:
        return None
    last = max(snapshots)
    return sum(1 for step in _of(r0, Step, 0) if step.seq < last)


def _final_attempt_view(run: RunView) -> RunView:
    """The run as its last attempt saw it: earlier attempts were stopped by the restart."""
    last = max((r.last_attempt for r in run.ranks), default=0)
    return dataclasses.replace(run, ranks=[r.attempt_view(last) for r in run.ranks])


_core_completed = get_check("run.completed")


def _earlier_attempt_view(run: RunView, attempt: int) -> RunView:
    """The run as an attempt before the last saw it: its events only. Exit codes and stacks are
    the last attempt's, so they are left out; the run's wall clock did not stop this attempt."""
    ranks = [
        dataclasses.replace(r.attempt_view(attempt), exit_code=None, stack=None) for r in run.ranks
    ]
    return dataclasses.replace(run, ranks=ranks, timed_out=False)


def _times(n: int) -> Message:
    if n == 1:
        return msg("elastic.once", "once")
    return msg("elastic.times", "{n} times", n=n)


def _completed_after_restarts(run: RunView, params: dict[str, Any]) -> Outcome:
    """run.completed, judged on the last attempt of a run that torchrun restarted.

    The ranks of an attempt the grader injected a failure into stop by design (the faulted rank
    exits, its peers lose it); only the attempt that ran to the end counts. An earlier attempt
    that ended with no injected failure ended because of the program itself: that is reported.
    """
    assert _core_completed is not None
    last = max((r.last_attempt for r in run.ranks), default=0)
    if last == 0:
        return _core_completed.fn(run, params)
    for attempt in range(last):
        earlier = _earlier_attempt_view(run, attempt)
        if earlier.typed(Fault):
            continue
        crashed = _core_completed.fn(earlier, params)
        if crashed.status == "fail":
            crashed.message = msg(
                "elastic.attempt_crashed",
                "Attempt {attempt} ended without the grader's injected failure, so torchrun "
                "restarted the ranks {times} because of your program: {reason}",
                attempt=attempt + 1,
                times=_times(last),
                reason=_lower_first(crashed.message),
            )
            return crashed
    outcome = _core_completed.fn(_final_attempt_view(run), params)
    if outcome.status == "pass":
        outcome.message = msg(
            "elastic.completed_in_attempt",
            "{message} in attempt {attempt}, after torchrun restarted the ranks {times}.",
            message=_edit(outcome.message, lambda text: text.rstrip(".")),
            attempt=last + 1,
            times=_times(last),
        )
    else:
        outcome.message = msg(
            "elastic.failed_in_attempt",
            "In attempt {attempt}, after torchrun restarted the ranks {times}: {reason}",
            attempt=last + 1,
            times=_times(last),
            reason=_lower_first(outcome.message),
        )
    return outcome


def _lower_first(text: str) -> str:
    """The text with its first letter lower-cased, to go on after a colon (not an acronym)."""
    return _edit(text, lambda s: s[:1].lower() + s[1:] if s[:2] != s[:2].upper() else s)


def _edit(text: str, change: Callable[[str], str]) -> str:
    """`change` applied to the English of `text`; a `Message` keeps its id and parameters (its
    template is changed), so it is still translated inside the sentence that quotes it."""
    english = change(str(text))
    if not isinstance(text, Message):
        return english
    edited = Message(text.message_id, change(text.template), text.params)
    if edited == english:
        return edited
    # The change fell inside a parameter (e.g. "{failure} Then ..."): edit that parameter, so
    # the sentence keeps its id.
    for key, value in text.params.items():
        if isinstance(value, str):
            params = {**text.params, key: _edit(value, change)}
            edited = Message(text.message_id, text.template, params)
            if edited == english:
                return edited
    return english


if _core_completed is not None:
    check("run.completed", title=_core_completed.title, hint=_core_completed.hint)(
        _completed_after_restarts
    )
