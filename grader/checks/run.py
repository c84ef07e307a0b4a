"""The run as a whole: it finished, joined and left the process group, used its own GPU."""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass
from typing import Any

from grader.checks.base import (
    Outcome,
    RunView,
    check,
    failed,
    passed,
    ranks_text,
    skipped,
    stack_line,
)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip()[:300].rstrip(".") if lines else ""


@check(
    "run.completed",
    title="Every rank runs to the end",
    hint="Read the first failing rank's traceback in its output below: the line it names is where "
    "to start. A rank stuck in a collective usually means the ranks did not all call it.",
)
def run_completed(run: RunView, params: dict[str, Any]) -> Outcome:
    if run.timed_out:
        parts, first_rank, first_line = [], None, None
        for r in run.ranks:
            end = r.end
            if end is not None:
                parts.append(f"rank {r.rank} had finished")
                continue
            line = stack_line(r.stack, r.learner_file)
            if line is not None:
                parts.append(f"rank {r.rank} was stuck {run.at(line)}")
                if first_rank is None:
                    first_rank, first_line = r.rank, line
            else:
                parts.append(
                    f"rank {r.rank} was not running your code (still starting, or in torch)"
                )
        return failed(
            f"The run did not finish within {run.wall_seconds:g} s and was stopped: "
            + "; ".join(parts)
            + ".",
            rank=first_rank,
            line=first_line,
        )
    crashes = sorted(
        ((e.get("t", 0.0), rank, e) for rank, e in run.events("exception")), key=lambda x: x[0]
    )
    failures = _failures(run)
    if failures:
        first = failures[0]
        if first.exception is not None and _is_store_timeout(first.exception.get("message", "")):
            return _store_timeout(first)
        if first.exception is not None and _is_timeout(first.exception.get("message", "")):
            return _collective_timeout(run, crashes)
        others = sorted({f.rank for f in failures[1:]} - {first.rank})
        msg = _sentence(f"Rank {first.rank} failed first{first.what}")
        if others:
            msg += (
                f" Then {ranks_text(others)} failed too "
                "(usually a consequence: their peer was gone)."
            )
        return failed(msg, rank=first.rank, line=first.line)
    exits = [(r.rank, r.end) for r in run.ranks if r.end and r.end.status == "exit"]
    if exits:
        rank, end = exits[0]
        return failed(
            f"Rank {rank} called sys.exit({end.exit_code}): a non-zero exit means failure.",
            rank=rank,
        )
    missing = [r for r in run.ranks if r.end is None]
    if missing:
        # Ranks the launcher stopped (SIGTERM) because another one died come last.
        missing.sort(key=lambda r: r.exit_code == -signal.SIGTERM)
        r = missing[0]
        if r.exit_code is not None and r.exit_code < 0:
            why = _killed_text(run, r)
        elif r.exit_code is not None:
            why = f"exited with code {r.exit_code} without finishing your program (os._exit?)"
        else:
            why = "stopped before finishing"
        line = stack_line(r.stack, r.learner_file)
        return failed(
            f"Rank {r.rank} {why}" + (f"; it was {run.at(line)}" if line else "") + ".",
            rank=r.rank,
            line=line,
        )
    note = ""
    aborted = [r.rank for r in run.ranks if r.exit_code not in (0, None)]
    if aborted:
        note = (
            f" ({ranks_text(aborted)} then aborted in torch's own teardown after finishing: "
            "not your code's fault)"
        )
    return passed(f"All {run.world_size} ranks ran your program to the end{note}.")


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
    what: str  # ", at line 42 (`code`): RuntimeError: ..." (follows "Rank r failed first")
    line: int | None
    consequence: bool = False  # the peer-gone error of a rank whose peer failed
    exception: dict[str, Any] | None = None


def _failures(run: RunView) -> list[_Failure]:
    """When some rank raised: every rank that failed, the one that failed first first.

    Besides the ranks that raised, a rank that died of a signal (an abort in torch's C++ code,
    such as gloo's "collective mismatch", leaves a faulthandler dump and no Python exception) and
    one that called sys.exit(n) are candidates; a peer's "connection reset" comes after them, and
    ranks the launcher stopped (SIGTERM) are not failures of their own.
    """
    found: list[_Failure] = []
    for rank, e in run.events("exception"):
        message = e.get("message", "")
        at = run.at(e.get("line")) or "before reaching your code"
        found.append(
            _Failure(
                rank=rank,
                t=float(e.get("t", 0.0)),
                what=f", {at}: {e.get('type')}: {_first_line(message)}",
                line=e.get("line"),
                consequence=any(p in message.lower() for p in _PEER_GONE),
                exception=e,
            )
        )
    if not found:
        return []
    raised = {f.rank for f in found}
    for r in run.ranks:
        if r.rank in raised:
            continue
        if r.end is not None and r.end.status == "exit":
            found.append(
                _Failure(
                    rank=r.rank,
                    t=r.end.t,
                    what=f": it called sys.exit({r.end.exit_code}), and a non-zero exit "
                    "means failure",
                    line=r.end.line,
                )
            )
        elif r.end is None and r.exit_code is not None and r.exit_code < 0:
            fatal = r.of("fatal")
            if r.exit_code == -signal.SIGTERM and not fatal:
                continue  # the launcher stopped it because another rank had failed
            line = stack_line(r.stack, r.learner_file)
            found.append(
                _Failure(
                    rank=r.rank,
                    t=float(fatal[-1].get("t", math.inf)) if fatal else math.inf,
                    what=(f", {run.at(line)}: it " if line else ": it ") + _killed_text(run, r),
                    line=line,
                )
            )
    return sorted(found, key=lambda f: (f.consequence, f.t, f.rank))


def _killed_text(run: RunView, r: Any) -> str:
    """ "was killed by SIGABRT; its output says: ..." for a rank that died of a signal."""
    why = f"was killed by {_signal_name(r.exit_code)}"
    if run.oom_killed or r.exit_code == -signal.SIGKILL:
        why += " (most likely it ran out of memory)"
    reason = _abort_reason(r.output)
    return why + (f"; its output says: {reason}" if reason else "")


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


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
        "process group has not been initialized" in e.get("message", "").lower()
        or "init_process_group" in e.get("message", "")
        for _, e in run.events("exception")
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
        _sentence(f"Rank {first.rank} failed first{first.what}")
        + " It timed out connecting to the process group's store: nothing listens at that "
        "address. Under torchrun the store already runs at MASTER_ADDR:MASTER_PORT and every "
        "worker only connects to it, so an init_method, MASTER_ADDR or MASTER_PORT fixed in the "
        "code sends the workers where no store runs. Use the default env:// init.",
        rank=first.rank,
        line=first.line,
    )


def _collective_timeout(run: RunView, crashes: list[tuple[float, int, dict[str, Any]]]) -> Outcome:
    """The process group's timeout fired: name where every rank was waiting."""
    by_rank = {rank: e for _, rank, e in reversed(crashes)}
    parts = []
    for r in run.ranks:
        e = by_rank.get(r.rank)
        if e is not None:
            parts.append(f"rank {r.rank} was waiting {run.at(e.get('line'))}")
        elif r.end is not None:
            parts.append(f"rank {r.rank} had finished")
        else:
            line = stack_line(r.stack, r.learner_file)
            parts.append(f"rank {r.rank} was " + (run.at(line) if line else "elsewhere"))
    _, rank, first = crashes[0]
    return failed(
        "The ranks never met in the same collective and the process group's timeout ended the "
        "run: "
        + "; ".join(parts)
        + ". Every rank must call the same collectives in the same order.",
        rank=rank,
        line=first.get("line"),
    )


@check(
    "dist.init",
    title="Every rank joins the process group",
    hint="Call dist.init_process_group() once at the start of every rank: backend 'nccl' on "
    "GPUs, 'gloo' on CPU. torchrun already set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.",
)
def dist_init(run: RunView, params: dict[str, Any]) -> Outcome:
    errors = run.events("init_error")
    if errors:
        rank, e = errors[0]
        return failed(
            f"Rank {rank} could not join the process group {run.at(e.get('line'))}: "
            f"{e.get('error')}",
            rank=rank,
            line=e.get("line"),
        )
    inits = {rank: e for rank, e in run.events("init")}
    missing = [r.rank for r in run.ranks if r.rank not in inits]
    if missing:
        early = run.not_reached("every rank joined the process group")
        if early and not inits and not _needed_a_group(run):
            return early
        return failed(
            f"{ranks_text(missing).capitalize()} never called init_process_group(), so "
            "the processes never formed a group"
            + (": each trained alone." if run.complete else "."),
            rank=missing[0],
        )
    for rank, e in inits.items():
        if e.get("world_size") != run.world_size:
            return failed(
                f"Rank {rank} joined a group of {e.get('world_size')} processes, but "
                f"{run.world_size} were launched.",
                rank=rank,
                line=e.get("line"),
            )
        if e.get("rank") != rank:
            return failed(
                f"The process torchrun launched as rank {rank} joined as rank {e.get('rank')}: "
                "do not hard-code the rank.",
                rank=rank,
                line=e.get("line"),
            )
    backend = inits[0].get("backend") or "undefined"
    requested = inits[0].get("requested")
    if run.device == "cuda" and "nccl" not in str(requested or backend):
        return failed(
            f"On this GPU worker the group uses backend {requested or backend!r}; "
            "GPUs need 'nccl'.",
            rank=0,
            line=inits[0].get("line"),
        )
    how = f"backend {requested}" if requested else "the default backend"
    return passed(f"All {run.world_size} ranks joined the process group ({how}).")


@check(
    "dist.cleanup",
    title="Every rank leaves the process group",
    hint="Call dist.destroy_process_group() at the end of every rank, in a `finally:` so it "
    "also runs when training raises.",
)
def dist_cleanup(run: RunView, params: dict[str, Any]) -> Outcome:
    inits = {rank for rank, _ in run.events("init")}
    if not inits:
        return skipped("No rank joined a process group, so there was none to leave.")
    destroyed = {rank for rank, e in run.events("destroy")}
    missing = sorted(inits - destroyed)
    if missing:
        if early := run.not_reached("the ranks left the process group"):
            return early
        return failed(
            f"{ranks_text(missing).capitalize()} ended without calling destroy_process_group().",
            rank=missing[0],
        )
    return passed("Every rank called destroy_process_group() before it ended.")


@check(
    "device.pinned",
    title="Each rank uses its own GPU",
    hint="Use device = torch.device('cuda', int(os.environ['LOCAL_RANK'])), call "
    "torch.cuda.set_device(device), move the model there and pass device_ids=[device.index] "
    "to DDP.",
)
def device_pinned(run: RunView, params: dict[str, Any]) -> Outcome:
    if run.device != "cuda":
        return skipped("This run used CPU workers; GPU pinning is checked on GPU workers only.")
    inits = {rank: e for rank, e in run.events("ddp_init")}
    used: dict[str, int] = {}
    for r in run.ranks:
        e = inits.get(r.rank)
        if e is None:
            if early := run.not_reached("every rank built its DDP model"):
                return early
            return failed(f"Rank {r.rank} never built a DDP model.", rank=r.rank)
        devices = e.get("devices", [])
        want = f"cuda:{r.rank}"
        if devices != [want]:
            return failed(
                f"Rank {r.rank}'s model is on {', '.join(devices) or 'no device'}, not on "
                f"its own GPU {want}.",
                rank=r.rank,
                line=e.get("line"),
            )
        if e.get("device_ids") and e["device_ids"] != [want] and e["device_ids"] != [str(r.rank)]:
            return failed(
                f"Rank {r.rank} passed device_ids={e['device_ids']} to DDP; it should be its own "
                f"GPU ({want}).",
                rank=r.rank,
                line=e.get("line"),
            )
        if want in used:
            return failed(f"Ranks {used[want]} and {r.rank} share {want}.", rank=r.rank)
        used[want] = r.rank
    return passed(f"Each of the {run.world_size} ranks kept its model on its own GPU.")
