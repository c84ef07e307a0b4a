"""The run as a whole: every rank ran the program to its end, and if not, which rank failed first
and why (the process group and the devices: `grader.checks.dist`)."""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass
from typing import Any

from grader.checks.base import (
    Outcome,
    RankView,
    RunView,
    check,
    failed,
    passed,
    ranks_text,
    stack_line,
)
from grader.events import Fatal, ProgramException
from grader.i18n import Message, msg


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip()[:300].rstrip(".") if lines else ""


def _stop(text: str) -> str:
    """The full stop a sentence ending with `text` still needs ("" after a ? or !)."""
    return "" if text.endswith((".", "?", "!")) else "."


def _joined(parts: list[Message]) -> Message:
    """ "a; b; c", each part translated on its own."""
    joined = parts[-1]
    for part in reversed(parts[:-1]):
        joined = msg("run.list", "{first}; {rest}", first=part, rest=joined)
    return joined


@check(
    "run.completed",
    title="Every rank runs to the end",
    hint="Start with the rank the message names, at the line it gives: its traceback is in its "
    'output below, or its stack under "Where each rank was stuck". When one rank waited in a '
    "collective, the rank that never arrived is the one to fix.",
)
def run_completed(run: RunView, params: dict[str, Any]) -> Outcome:
    if run.timed_out:
        return _timed_out(run)
    crashes = sorted(
        ((e.t, rank, e) for rank, e in run.typed(ProgramException)), key=lambda x: x[0]
    )
    failures = _failures(run)
    if failures:
        first = failures[0]
        if first.exception is not None and _is_store_timeout(first.exception.message):
            return _store_timeout(first)
        if first.exception is not None and _is_timeout(first.exception.message):
            return _collective_timeout(run, crashes)
        others = sorted({f.rank for f in failures[1:]} - {first.rank})
        text = first.headline
        if len(others) == 1:
            text = msg(
                "run.then_failed",
                "{failure} Then {ranks} failed too (usually a consequence: their peer was gone).",
                failure=first.headline,
                ranks=ranks_text(others),
            )
        elif others:  # a sentence of its own per number: the verb agrees in tr and pt-BR
            text = msg(
                "run.then_failed_many",
                "{failure} Then {ranks} failed too (usually a consequence: their peer was gone).",
                failure=first.headline,
                ranks=ranks_text(others),
            )
        return failed(text, rank=first.rank, line=first.line)
    exits = [(r.rank, r.end) for r in run.ranks if r.end and r.end.status == "exit"]
    if exits:
        rank, end = exits[0]
        return failed(
            msg(
                "run.sys_exit",
                "Rank {rank} called sys.exit({code}): a non-zero exit means failure.",
                rank=rank,
                code=end.exit_code,
            ),
            rank=rank,
        )
    missing = [r for r in run.ranks if r.end is None]
    if missing:
        return _unfinished(run, missing)
    aborted = [r.rank for r in run.ranks if r.exit_code not in (0, None)]
    if len(aborted) == 1:
        return passed(
            msg(
                "run.all_finished_teardown",
                "All {n} ranks ran your program to the end ({ranks} then aborted in torch's own "
                "teardown after finishing: not your code's fault).",
                n=run.world_size,
                ranks=ranks_text(aborted),
            )
        )
    if aborted:
        return passed(
            msg(
                "run.all_finished_teardown_many",
                "All {n} ranks ran your program to the end ({ranks} then aborted in torch's own "
                "teardown after finishing: not your code's fault).",
                n=run.world_size,
                ranks=ranks_text(aborted),
            )
        )
    return passed(
        msg(
            "run.all_finished",
            "All {n} ranks ran your program to the end.",
            n=run.world_size,
        )
    )


def _timed_out(run: RunView) -> Outcome:
    """The wall clock stopped the run: where every rank was."""
    parts: list[Message] = []
    first_rank, first_line = None, None
    for r in run.ranks:
        if r.end is not None:
            parts.append(msg("run.rank_finished", "rank {rank} had finished", rank=r.rank))
            continue
        line = stack_line(r.stack, r.learner_file)
        if line is not None:
            parts.append(
                msg(
                    "run.rank_stuck",
                    "rank {rank} was stuck {where}",
                    rank=r.rank,
                    where=run.at(line),
                )
            )
            if first_rank is None:
                first_rank, first_line = r.rank, line
        else:
            parts.append(
                msg(
                    "run.rank_not_in_code",
                    "rank {rank} was not running your code (still starting, or in torch)",
                    rank=r.rank,
                )
            )
    if not parts:
        parts.append(msg("run.no_rank", "no rank had started"))
    return failed(
        msg(
            "run.timed_out",
            "The run did not finish within {seconds:g} s and was stopped: {ranks}.",
            seconds=run.wall_seconds,
            ranks=_joined(parts),
        ),
        rank=first_rank,
        line=first_line,
    )


def _unfinished(run: RunView, missing: list[RankView]) -> Outcome:
    """Ranks that never reached the end of the program, with no exception of their own."""
    # Ranks the launcher stopped (SIGTERM) because another one died come last.
    missing.sort(key=lambda r: r.exit_code == -signal.SIGTERM)
    r = missing[0]
    if r.exit_code is not None and r.exit_code < 0:
        why = _killed_text(run, r)
    elif r.exit_code is not None:
        why = msg(
            "run.exited_early",
            "exited with code {code} without finishing your program (os._exit?)",
            code=r.exit_code,
        )
    else:
        why = msg("run.stopped_early", "stopped before finishing")
    line = stack_line(r.stack, r.learner_file)
    if line:
        text = msg(
            "run.unfinished_at",
            "Rank {rank} {why}; it was {where}.",
            rank=r.rank,
            why=why,
            where=run.at(line),
        )
    else:
        text = msg("run.unfinished", "Rank {rank} {why}.", rank=r.rank, why=why)
    return failed(text, rank=r.rank, line=line)


# An error a rank gets because a peer went away: a consequence, never the first failure when the
# peer's own failure was seen.
_PEER_GONE = (
    "connection reset by peer",
    "connection closed by peer",
    "broken pipe",
    "socket closed",
    "remote worker",
)


@dataclass
class _Failure:
    rank: int
    t: float  # when it happened; inf when nothing says
    headline: Message  # "Rank 0 failed first, at line 42 (`code`): RuntimeError: ..."
    line: int | None
    consequence: bool = False  # the peer-gone error of a rank whose peer failed
    exception: ProgramException | None = None


def _raised(run: RunView, rank: int, e: ProgramException) -> _Failure:
    error = _first_line(e.message)
    headline = msg(
        "run.failed_raised",
        "Rank {rank} failed first, {where}: {type}: {error}{stop}",
        rank=rank,
        where=run.at(e.line) or msg("run.before_your_code", "before reaching your code"),
        type=e.type,
        error=error,
        stop=_stop(error),
    )
    return _Failure(
        rank=rank,
        t=e.t,
        headline=headline,
        line=e.line,
        consequence=any(p in e.message.lower() for p in _PEER_GONE),
        exception=e,
    )


def _failures(run: RunView) -> list[_Failure]:
    """When some rank raised: every rank that failed, the one that failed first first.

    Besides the ranks that raised, a rank that died of a signal (an abort in torch's C++ code,
    such as gloo's "collective mismatch", leaves a faulthandler dump and no Python exception) and
    one that called sys.exit(n) are candidates; a peer's "connection reset" comes after them, and
    ranks the launcher stopped (SIGTERM) are not failures of their own.
    """
    found = [_raised(run, rank, e) for rank, e in run.typed(ProgramException)]
    if not found:
        return []
    raised = {f.rank for f in found}
    for r in run.ranks:
        if r.rank in raised:
            continue
        if r.end is not None and r.end.status == "exit":
            headline = msg(
                "run.failed_exit",
                "Rank {rank} failed first: it called sys.exit({code}), and a non-zero exit means "
                "failure.",
                rank=r.rank,
                code=r.end.exit_code,
            )
            found.append(_Failure(rank=r.rank, t=r.end.t, headline=headline, line=r.end.line))
        elif r.end is None and r.exit_code is not None and r.exit_code < 0:
            fatal = r.typed(Fatal)
            if r.exit_code == -signal.SIGTERM and not fatal:
                continue  # the launcher stopped it because another rank had failed
            found.append(_killed_failure(run, r, fatal[-1].t if fatal else math.inf))
    return sorted(found, key=lambda f: (f.consequence, f.t, f.rank))


def _killed_failure(run: RunView, r: RankView, t: float) -> _Failure:
    killed = _killed_text(run, r)
    line = stack_line(r.stack, r.learner_file)
    if line:
        headline = msg(
            "run.failed_killed_at",
            "Rank {rank} failed first, {where}: it {killed}{stop}",
            rank=r.rank,
            where=run.at(line),
            killed=killed,
            stop=_stop(killed),
        )
    else:
        headline = msg(
            "run.failed_killed",
            "Rank {rank} failed first: it {killed}{stop}",
            rank=r.rank,
            killed=killed,
            stop=_stop(killed),
        )
    return _Failure(rank=r.rank, t=t, headline=headline, line=line)


def _killed_text(run: RunView, r: RankView) -> Message:
    """ "was killed by SIGABRT; its output says: ..." for a rank that died of a signal."""
    values: dict[str, Any] = {"signal": _signal_name(r.exit_code or 0)}
    oom = run.oom_killed or r.exit_code == -signal.SIGKILL
    reason = _abort_reason(r.output)
    if reason:
        values["reason"] = reason
        if oom:
            return msg(
                "run.killed_oom_says",
                "was killed by {signal} (most likely it ran out of memory); its output says: "
                "{reason}",
                **values,
            )
        return msg("run.killed_says", "was killed by {signal}; its output says: {reason}", **values)
    if oom:
        return msg(
            "run.killed_oom", "was killed by {signal} (most likely it ran out of memory)", **values
        )
    return msg("run.killed", "was killed by {signal}", **values)


def _abort_reason(output: str) -> str:
    """The C++ error a rank printed before it aborted ("what(): ... collective mismatch ...")."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "what():" in ln:
            return ln.split("what():", 1)[1].strip()[:300].rstrip(".")
    for ln in reversed(lines):
        if ln.startswith("terminate called"):
            return ln[:300]
    return ""


def _is_timeout(message: str) -> bool:
    lowered = message.lower()
    return "timed out" in lowered or "timeout" in lowered


def _is_store_timeout(message: str) -> bool:
    """The rank never reached the process group's store (TCPStore client connect timeout)."""
    lowered = message.lower()
    return "client socket has timed out" in lowered or (
        "timed out" in lowered and "trying to connect to" in lowered
    )


def _store_timeout(first: _Failure) -> Outcome:
    """A rank timed out connecting to a store: the address it was given has no store behind it."""
    return failed(
        msg(
            "run.store_timeout",
            "{failure} It timed out connecting to the process group's store: nothing listens at "
            "that address. Under torchrun the store already runs at MASTER_ADDR:MASTER_PORT and "
            "every worker only connects to it, so an init_method, MASTER_ADDR or MASTER_PORT "
            "fixed in the code sends the workers where no store runs. Use the default env:// "
            "init.",
            failure=first.headline,
        ),
        rank=first.rank,
        line=first.line,
    )


def _collective_timeout(
    run: RunView, crashes: list[tuple[float, int, ProgramException]]
) -> Outcome:
    """The process group's timeout fired: name where every rank was waiting, and first the rank
    that never arrived (no timeout of its own, stopped elsewhere): that is the one to look at."""
    by_rank = {rank: e for _, rank, e in reversed(crashes)}
    waiting: list[Message] = []
    absent: list[Message] = []
    culprit: tuple[int, int | None] | None = None
    for r in run.ranks:
        e = by_rank.get(r.rank)
        if e is not None:
            waiting.append(
                msg(
                    "run.rank_waiting",
                    "rank {rank} was waiting {where}",
                    rank=r.rank,
                    where=run.at(e.line),
                )
            )
        elif r.end is not None:
            waiting.append(msg("run.rank_finished", "rank {rank} had finished", rank=r.rank))
        elif line := stack_line(r.stack, r.learner_file):
            absent.append(
                msg(
                    "run.rank_never_arrived",
                    "rank {rank} never got there: it was {where}",
                    rank=r.rank,
                    where=run.at(line),
                )
            )
            culprit = culprit or (r.rank, line)
        else:
            absent.append(
                msg(
                    "run.rank_never_arrived_elsewhere",
                    "rank {rank} never got there: it was not running your code (still starting, "
                    "or inside torch)",
                    rank=r.rank,
                )
            )
            culprit = culprit or (r.rank, None)
    _, rank, first = crashes[0]
    if culprit is None:
        return failed(
            msg(
                "run.collective_timeout",
                "The ranks never met in the same collective and the process group's timeout "
                "ended the run: {ranks}. Every rank must call the same collectives in the same "
                "order.",
                ranks=_joined(waiting),
            ),
            rank=rank,
            line=first.line,
        )
    return failed(
        msg(
            "run.collective_timeout_absent",
            "The process group's timeout ended the run: {absent}; {ranks}. Look at the rank that "
            "never arrived: every rank must reach the same collectives in the same order.",
            absent=_joined(absent),
            ranks=_joined(waiting),
        ),
        rank=culprit[0],
        line=culprit[1],
    )
