"""Checks of `torchrun-launch/elastic-resume`: snapshot, injected failure, restart, resume.

The grader launches the program twice: once with an injected failure (a rank exits mid-training
on the first attempt; torchrun restarts every rank, `--max-restarts=1`) and once uninterrupted,
the reference. On CPU with gloo and one thread per rank, training is deterministic, so a correct
resume ends with bitwise the same weights as the reference (measured here); the tolerance only
absorbs a different summation order, far below one SGD step's change.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grader.checks.base import (
    Outcome,
    RunView,
    check,
    failed,
    first_optimizer_steps,
    get_check,
    passed,
    plural,
    ranks_text,
)

REL_TOL = 1e-6


def _fault(run: RunView) -> tuple[int, dict[str, Any]] | None:
    found = run.events("fault")
    return found[0] if found else None


def _saved_paths(run: RunView, attempt: int) -> set[str]:
    paths: set[str] = set()
    for r in run.ranks:
        for e in r.in_attempt(attempt):
            if e.get("kind") == "save" and e.get("ok", True) and e.get("path"):
                paths.add(str(e["path"]))
            if e.get("kind") == "rename" and e.get("dst"):
                paths.add(str(e["dst"]))
    return paths


def _no_fault_message(run: RunView) -> str:
    planned = (run.faults or [{}])[0]
    rank = int(planned.get("rank", 1))
    view = run.rank(rank)
    n = len(view.of("step")) if view is not None else 0
    return (
        f"The grader's injected failure never fired: it was to stop rank {rank} after its "
        f"optimizer step {planned.get('after_steps')}, as placed from an uninterrupted run of your "
        f"program ({plural(int(planned.get('reference_steps', 0)), 'step')}), but this time rank "
        f"{rank} took {plural(n, 'optimizer step')} in all. Does the amount of training depend on "
        "something other than the data, such as the clock or a random draw?"
    )


def _stopped(fe: dict[str, Any], frank: int) -> str:
    return f"Rank {frank} was stopped after its optimizer step {int(fe.get('after_steps', 0))}"


def _nothing_saved(fe: dict[str, Any], frank: int) -> str:
    """Why no snapshot existed when the rank was stopped, from where the fault was placed."""
    total = plural(int(fe.get("reference_steps", 0)), "optimizer step")
    how = (
        "Save the training state (model, optimizer, and where to continue) from rank 0 as "
        "training goes, e.g. at the end of every epoch."
    )
    if fe.get("placed") == "no_snapshot":
        return (
            f"Your program never saved a snapshot of the model in an uninterrupted run ({total} "
            f"on rank {frank}), so the grader stopped rank {frank} halfway, after its optimizer "
            f"step {fe.get('after_steps')}, and the restart had nothing to resume from. {how}"
        )
    if fe.get("placed") == "late_snapshot":
        return (
            "In an uninterrupted run your program saved its first snapshot only after its last "
            f"optimizer step ({total}), so a failure during training always loses all of it: the "
            f"grader stopped rank {frank} halfway, after its optimizer step "
            f"{fe.get('after_steps')}, and the restart had nothing to resume from. {how}"
        )
    return (
        f"{_stopped(fe, frank)}, one step after an uninterrupted run had completely written its "
        f"first snapshot (after step {fe.get('snapshot_step')}), but in this run no snapshot had "
        f"been saved by then, so the restart had nothing to resume from. {how}"
    )


@check(
    "elastic.resumed",
    title="After the restart, every rank resumes from the snapshot",
    hint="At start-up, if the snapshot file exists, load it on every rank (model, optimizer and "
    "the epoch to continue from) before wrapping the model in DDP; save it from rank 0 at the "
    "end of every epoch.",
)
def resumed(run: RunView, params: dict[str, Any]) -> Outcome:
    fault = _fault(run)
    if fault is None:
        return failed(_no_fault_message(run))
    frank, fe = fault
    attempt = int(fe.get("attempt", 0))
    restarted = [r for r in run.ranks if r.in_attempt(attempt + 1)]
    if not restarted:
        return failed(f"{_stopped(fe, frank)} and the job was not restarted.")
    saved = _saved_paths(run, attempt)
    if not saved:
        return failed(_nothing_saved(fe, frank), rank=frank)
    not_loaded = []
    for r in run.ranks:
        loads = [
            e
            for e in r.in_attempt(attempt + 1, "load")
            if e.get("ok", True) and str(e.get("path")) in saved
        ]
        if not loads:
            not_loaded.append(r.rank)
    if not_loaded:
        return failed(
            f"After the restart, {ranks_text(not_loaded)} did not load the snapshot "
            f"({', '.join(sorted(p.rsplit('/', 1)[-1] for p in saved))}) saved before the "
            "failure, so they started again from scratch.",
            rank=not_loaded[0],
        )
    ref = run.reference
    for r in run.ranks:
        # The same terms on both sides: this rank's steps, every optimizer's, in each run.
        twin = ref.rank(r.rank) if ref is not None else None
        total = len(twin.of("step")) if twin is not None else 0
        again = len(r.in_attempt(attempt + 1, "step"))
        if total and again >= total:
            return failed(
                f"After the restart rank {r.rank} loaded the snapshot but took {again} "
                f"optimizer steps, as many as an uninterrupted run ({total}): it started "
                "over from the beginning instead of where the snapshot was taken.",
                rank=r.rank,
            )
    r0 = run.ranks[0]
    load = next(e for e in r0.in_attempt(attempt + 1, "load") if str(e.get("path")) in saved)
    return passed(
        f"{_stopped(fe, frank)}; after the restart every rank loaded the snapshot "
        f"{run.where(load.get('line'))} and continued with "
        f"{plural(len(r0.in_attempt(attempt + 1, 'step')), 'more optimizer step')}."
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
    fault = _fault(run)
    if fault is None:
        return failed(_no_fault_message(run))
    ref = run.reference
    if ref is None or not ref.ranks:
        return failed("The uninterrupted reference run did not take place.")
    ref_steps = first_optimizer_steps(ref.ranks[0].events)
    if not ref_steps or ref.ranks[0].end is None:
        return failed(
            "The uninterrupted run of your program did not finish, so there is nothing "
            "to compare with (see the other checks)."
        )
    last = max(int(e.get("attempt", 0)) for e in run.ranks[0].events)
    got = first_optimizer_steps(run.ranks[0].in_attempt(last))
    if not got:
        return failed("After the restart rank 0 took no optimizer step.", rank=0)
    a, b = got[-1], ref_steps[-1]
    if a.get("digest") == b.get("digest"):
        return passed(
            "After the failure and the restart, rank 0's final weights are bitwise identical to "
            f"those of an uninterrupted run ({plural(len(ref_steps), 'step')})."
        )
    sa, sb = a.get("sums", []), b.get("sums", [])
    names = b.get("names") or ref_steps[0].get("names") or []
    worst, where_i = 0.0, 0
    for i, (x, y) in enumerate(zip(sa, sb, strict=False)):
        rel = abs(x - y) / max(abs(x), abs(y), 1e-12)
        if rel > worst:
            worst, where_i = rel, i
    if worst <= tol and len(sa) == len(sb):
        return passed(
            "After the failure and the restart, rank 0's final weights match an uninterrupted "
            f"run within {worst:.1e} (relative), not bitwise."
        )
    fstep = int(fault[1].get("after_steps", 0))
    before = _steps_before_snapshot(run)
    done = (before or 0) + len(got)
    name = names[where_i] if where_i < len(names) else f"parameter {where_i}"
    extra = ""
    if before is not None and done != len(ref_steps):
        extra = (
            f" Counting steps: {before} before the snapshot + {len(got)} after the restart = "
            f"{done}, but an uninterrupted run takes {len(ref_steps)}: "
            + ("an epoch was trained twice." if done > len(ref_steps) else "training was skipped.")
        )
    return failed(
        f"After the failure (after step {fstep}) and the restart, rank 0's final weights differ "
        f"from an uninterrupted run's: the sum of {name} is {sa[where_i]:.6g} instead of "
        f"{sb[where_i]:.6g} (relative difference {worst:.1e}).{extra}",
        rank=0,
    )


def _steps_before_snapshot(run: RunView) -> int | None:
    """Rank 0's optimizer steps before the last snapshot it saved in the first attempt."""
    events = run.ranks[0].in_attempt(0)
    count, at = 0, None
    for e in events:
        if e.get("kind") == "step":
            count += 1
        if e.get("kind") in ("save", "rename"):
            at = count
    return at


def _final_attempt_view(run: RunView) -> RunView:
    """The run as its last attempt saw it: earlier attempts were stopped by the restart."""
    last = max((int(e.get("attempt", 0)) for r in run.ranks for e in r.events), default=0)
    ranks = [
        dataclasses.replace(r, events=[e for e in r.events if int(e.get("attempt", 0)) == last])
        for r in run.ranks
    ]
    return dataclasses.replace(run, ranks=ranks)


_core_completed = get_check("run.completed")


def _earlier_attempt_view(run: RunView, attempt: int) -> RunView:
    """The run as an attempt before the last saw it: its events only. Exit codes and stacks are
    the last attempt's, so they are left out; the run's wall clock did not stop this attempt."""
    ranks = [
        dataclasses.replace(
            r,
            events=[e for e in r.events if int(e.get("attempt", 0)) == attempt],
            exit_code=None,
            stack=None,
        )
        for r in run.ranks
    ]
    return dataclasses.replace(run, ranks=ranks, timed_out=False)


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _completed_after_restarts(run: RunView, params: dict[str, Any]) -> Outcome:
    """run.completed, judged on the last attempt of a run that torchrun restarted.

    The ranks of an attempt the grader injected a failure into stop by design (the faulted rank
    exits, its peers lose it); only the attempt that ran to the end counts. An earlier attempt
    that ended with no injected failure ended because of the program itself: that is reported.
    """
    assert _core_completed is not None
    last = max((int(e.get("attempt", 0)) for r in run.ranks for e in r.events), default=0)
    if last == 0:
        return _core_completed.fn(run, params)
    restarted = f"torchrun restarted the ranks {_times(last)}"
    for attempt in range(last):
        earlier = _earlier_attempt_view(run, attempt)
        if earlier.events("fault"):
            continue
        crashed = _core_completed.fn(earlier, params)
        if crashed.status == "fail":
            crashed.message = (
                f"Attempt {attempt + 1} ended without the grader's injected failure, so "
                f"{restarted} because of your program: " + _lower_first(crashed.message)
            )
            return crashed
    outcome = _core_completed.fn(_final_attempt_view(run), params)
    if outcome.status == "pass":
        outcome.message = (
            outcome.message.rstrip(".") + f" in attempt {last + 1}, after {restarted}."
        )
    else:
        outcome.message = f"In attempt {last + 1}, after {restarted}: " + _lower_first(
            outcome.message
        )
    return outcome


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


if _core_completed is not None:
    check("run.completed", title=_core_completed.title, hint=_core_completed.hint)(
        _completed_after_restarts
    )
