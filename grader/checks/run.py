"""The run as a whole: it finished, joined and left the process group, used its own GPU."""

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
    skipped,
    stack_line,
)
from grader.events import Destroy, Fatal, Init, InitError, ProgramException
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
    hint="Read the first failing rank's traceback in its output below: the line it names is where "
    "to start. A rank stuck in a collective usually means the ranks did not all call it.",
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


def _needed_a_group(run: RunView) -> bool:
    """Some rank failed because there was no process group."""
    return any(
        "process group has not been initialized" in e.message.lower()
        or "init_process_group" in e.message
        for _, e in run.typed(ProgramException)
    )


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
    """The process group's timeout fired: name where every rank was waiting."""
    by_rank = {rank: e for _, rank, e in reversed(crashes)}
    parts: list[Message] = []
    for r in run.ranks:
        e = by_rank.get(r.rank)
        if e is not None:
            parts.append(
                msg(
                    "run.rank_waiting",
                    "rank {rank} was waiting {where}",
                    rank=r.rank,
                    where=run.at(e.line),
                )
            )
        elif r.end is not None:
            parts.append(msg("run.rank_finished", "rank {rank} had finished", rank=r.rank))
        elif line := stack_line(r.stack, r.learner_file):
            parts.append(
                msg("run.rank_was_at", "rank {rank} was {where}", rank=r.rank, where=run.at(line))
            )
        else:
            parts.append(msg("run.rank_elsewhere", "rank {rank} was elsewhere", rank=r.rank))
    _, rank, first = crashes[0]
    return failed(
        msg(
            "run.collective_timeout",
            "The ranks never met in the same collective and the process group's timeout ended "
            "the run: {ranks}. Every rank must call the same collectives in the same order.",
            ranks=_joined(parts),
        ),
        rank=rank,
        line=first.line,
    )


@check(
    "dist.init",
    title="Every rank joins the process group",
    hint="Call dist.init_process_group() once at the start of every rank: backend 'nccl' on "
    "GPUs, 'gloo' on CPU. torchrun already set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.",
)
def dist_init(run: RunView, params: dict[str, Any]) -> Outcome:
    errors = run.typed(InitError)
    if errors:
        rank, error = errors[0]
        return failed(
            msg(
                "run.init_error",
                "Rank {rank} could not join the process group {where}: {error}",
                rank=rank,
                where=run.at(error.line),
                error=error.error,
            ),
            rank=rank,
            line=error.line,
        )
    inits = {rank: e for rank, e in run.typed(Init)}
    missing = [r.rank for r in run.ranks if r.rank not in inits]
    if missing:
        reached = msg("run.reached_init", "every rank joined the process group")
        early = run.not_reached(reached)
        if early and not inits and not _needed_a_group(run):
            return early
        return failed(_no_init(run, missing), rank=missing[0])
    for rank, e in inits.items():
        if e.world_size != run.world_size:
            return failed(
                msg(
                    "run.wrong_world_size",
                    "Rank {rank} joined a group of {size} processes, but {launched} were launched.",
                    rank=rank,
                    size=e.world_size,
                    launched=run.world_size,
                ),
                rank=rank,
                line=e.line,
            )
        if e.rank != rank:
            return failed(
                msg(
                    "run.wrong_rank",
                    "The process torchrun launched as rank {rank} joined as rank {joined}: do not "
                    "hard-code the rank.",
                    rank=rank,
                    joined=e.rank,
                ),
                rank=rank,
                line=e.line,
            )
    backend = inits[0].backend or "undefined"
    requested = inits[0].requested
    if run.device == "cuda" and "nccl" not in str(requested or backend):
        return failed(
            msg(
                "run.not_nccl",
                "On this GPU worker the group uses backend {backend}; GPUs need 'nccl'.",
                backend=repr(requested or backend),
            ),
            rank=0,
            line=inits[0].line,
        )
    how = (
        msg("run.backend_named", "backend {backend}", backend=str(requested))
        if requested
        else msg("run.backend_default", "the default backend")
    )
    return passed(
        msg(
            "run.all_joined",
            "All {n} ranks joined the process group ({how}).",
            n=run.world_size,
            how=how,
        )
    )


def _no_init(run: RunView, missing: list[int]) -> Message:
    """Ranks that never called init_process_group (one sentence per number and outcome: the verb
    agrees with the ranks in tr and pt-BR)."""
    ranks = ranks_text(missing)
    if run.complete and len(missing) == 1:
        return msg(
            "run.no_init_alone",
            "{ranks:capital} never called init_process_group(), so the processes never formed a "
            "group: each trained alone.",
            ranks=ranks,
        )
    if run.complete:
        return msg(
            "run.no_init_alone_many",
            "{ranks:capital} never called init_process_group(), so the processes never formed a "
            "group: each trained alone.",
            ranks=ranks,
        )
    if len(missing) == 1:
        return msg(
            "run.no_init",
            "{ranks:capital} never called init_process_group(), so the processes never formed a "
            "group.",
            ranks=ranks,
        )
    return msg(
        "run.no_init_many",
        "{ranks:capital} never called init_process_group(), so the processes never formed a group.",
        ranks=ranks,
    )


@check(
    "dist.cleanup",
    title="Every rank leaves the process group",
    hint="Call dist.destroy_process_group() at the end of every rank, in a `finally:` so it "
    "also runs when training raises.",
)
def dist_cleanup(run: RunView, params: dict[str, Any]) -> Outcome:
    inits = {rank for rank, _ in run.typed(Init)}
    if not inits:
        return skipped(
            msg("run.no_group", "No rank joined a process group, so there was none to leave.")
        )
    destroyed = {rank for rank, _ in run.typed(Destroy)}
    missing = sorted(inits - destroyed)
    if missing:
        if early := run.not_reached(msg("run.reached_cleanup", "the ranks left the process group")):
            return early
        if len(missing) == 1:
            text = msg(
                "run.no_destroy",
                "{ranks:capital} ended without calling destroy_process_group().",
                ranks=ranks_text(missing),
            )
        else:
            text = msg(
                "run.no_destroy_many",
                "{ranks:capital} ended without calling destroy_process_group().",
                ranks=ranks_text(missing),
            )
        return failed(text, rank=missing[0])
    return passed(msg("run.all_left", "Every rank called destroy_process_group() before it ended."))


@check(
    "device.pinned",
    title="Each rank uses its own GPU",
    hint="Use device = torch.device('cuda', int(os.environ['LOCAL_RANK'])), call "
    "torch.cuda.set_device(device), move the model there and pass device_ids=[device.index] "
    "to DDP.",
)
def device_pinned(run: RunView, params: dict[str, Any]) -> Outcome:
    if run.device != "cuda":
        return skipped(
            msg(
                "run.cpu_workers",
                "This run used CPU workers; GPU pinning is checked on GPU workers only.",
            )
        )
    # Raw records: DdpInit (grader.events, another section) does not declare devices and
    # device_ids yet.
    inits = {rank: e for rank, e in run.events("ddp_init")}
    used: dict[str, int] = {}
    for r in run.ranks:
        e = inits.get(r.rank)
        if e is None:
            if early := run.not_reached(msg("run.reached_ddp", "every rank built its DDP model")):
                return early
            return failed(
                msg("run.no_ddp", "Rank {rank} never built a DDP model.", rank=r.rank),
                rank=r.rank,
            )
        devices = e.get("devices", [])
        want = f"cuda:{r.rank}"
        if devices != [want]:
            return failed(
                msg(
                    "run.wrong_device",
                    "Rank {rank}'s model is on {devices}, not on its own GPU {want}.",
                    rank=r.rank,
                    devices=", ".join(devices) or msg("run.no_device", "no device"),
                    want=want,
                ),
                rank=r.rank,
                line=e.get("line"),
            )
        ids = e.get("device_ids")
        if ids and ids != [want] and ids != [str(r.rank)]:
            return failed(
                msg(
                    "run.wrong_device_ids",
                    "Rank {rank} passed device_ids={ids} to DDP; it should be its own GPU "
                    "({want}).",
                    rank=r.rank,
                    ids=str(ids),
                    want=want,
                ),
                rank=r.rank,
                line=e.get("line"),
            )
        if want in used:
            return failed(
                msg(
                    "run.shared_gpu",
                    "Ranks {a} and {b} share {device}.",
                    a=used[want],
                    b=r.rank,
                    device=want,
                ),
                rank=r.rank,
            )
        used[want] = r.rank
    return passed(
        msg(
            "run.own_gpus",
            "Each of the {n} ranks kept its model on its own GPU.",
            n=run.world_size,
        )
    )
