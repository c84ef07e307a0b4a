"""Check plumbing: the view of one run that checks read, and the registry of checks.

A check is a pure function `(run: RunView, params: dict) -> Outcome`, registered under its id
with `@check(...)`. Every module of `grader.checks` is imported on first use, so an exercise adds
checks by adding a module (e.g. `grader/checks/syncbn.py`) without editing any other file.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from grader.events import E, End, Event, Start, Step, parse_all, parse_kinds
from grader.i18n import msg

Status = Literal["pass", "fail", "skip"]


@dataclass
class Outcome:
    status: Status
    message: str
    rank: int | None = None
    line: int | None = None
    # Another check's id whose hint fits this outcome better than this check's own.
    hint_of: str | None = None


def passed(message: str, **kw: Any) -> Outcome:
    return Outcome("pass", message, **kw)


def failed(message: str, **kw: Any) -> Outcome:
    return Outcome("fail", message, **kw)


def skipped(message: str, **kw: Any) -> Outcome:
    return Outcome("skip", message, **kw)


@dataclass
class RankView:
    rank: int
    exit_code: int | None
    output: str = ""
    truncated: bool = False
    stack: str | None = None
    # The raw trace records, as the rank wrote them: checks read them only through the typed
    # accessors below (a test fails a check module that reads them raw).
    events: list[dict[str, Any]] = field(default_factory=list)

    def typed(self, kind: type[E]) -> list[E]:
        """This rank's records of one kind (`grader.events`), typed, in order."""
        cache = self.__dict__.setdefault("_typed", {})
        count, found = cache.get(kind, (-1, []))
        if count != len(self.events):  # parsed once per kind, again if events were added
            found = parse_all(kind, self.events)
            cache[kind] = (len(self.events), found)
        typed: list[E] = found
        return typed

    def first_typed(self, kind: type[E]) -> E | None:
        found = self.typed(kind)
        return found[0] if found else None

    def typed_in_attempt(self, attempt: int, kind: type[E]) -> list[E]:
        """This rank's records of one kind in one attempt (torchelastic restart), typed."""
        return [e for e in self.typed(kind) if e.attempt == attempt]

    def typed_sequence(self, *kinds: type[Event]) -> list[Event]:
        """This rank's records of several kinds, typed, in the order they were written (tell
        them apart with isinstance)."""
        return parse_kinds(self.events, *kinds)

    @property
    def end(self) -> End | None:
        """The program's end record (the last attempt's), or None if the rank never got there."""
        ends = self.typed(End)
        return ends[-1] if ends else None

    @property
    def ended_ok(self) -> bool:
        return self.end is not None and self.end.status == "ok"

    @property
    def learner_file(self) -> str | None:
        start = self.first_typed(Start)
        return start.file if start else None

    @property
    def attempts(self) -> set[int]:
        """The attempts (torchelastic restarts) this rank left events in."""
        return {_attempt(e) for e in self.events}

    @property
    def last_attempt(self) -> int:
        """The last attempt (torchelastic restart) this rank left events in; 0 if none."""
        return max(self.attempts, default=0)

    def attempt_view(self, attempt: int) -> RankView:
        """This rank as one attempt saw it: that attempt's events only."""
        events = [e for e in self.events if _attempt(e) == attempt]
        return dataclasses.replace(self, events=events)

    @property
    def last_line(self) -> int | None:
        """The last line of the learner's file this rank was seen at (stack first, then events)."""
        line = stack_line(self.stack, self.learner_file)
        if line is not None:
            return line
        for e in reversed(self.events):
            if isinstance(e.get("line"), int):
                return int(e["line"])
        return None


def _attempt(raw: dict[str, Any]) -> int:
    """A raw record's attempt (set by grader.inside.ranklogs), without building the typed
    record: the views ask for it over every record of a rank."""
    return int(raw.get("attempt", 0))


@dataclass
class RunView:
    """Everything one launch at one world size left behind, as plain data."""

    world_size: int
    device: str  # "cpu" | "cuda"
    ranks: list[RankView]
    source: str = ""
    timed_out: bool = False
    wall_seconds: float = 0.0
    oom_killed: bool = False
    checkpoints: dict[str, Any] = field(default_factory=dict)
    platform_error: str | None = None
    # Nodes of a simulated multi-node launch, the faults injected into this launch, and the
    # uninterrupted twin launched before a faulted one (see `grader.launch.plan.plan_launches`).
    nnodes: int = 1
    faults: list[dict[str, Any]] = field(default_factory=list)
    reference: RunView | None = None
    # The launch whose working directory this one started from (`launch.resume`).
    resumed_from: RunView | None = None
    # The other judged launches of the same submission (other world sizes).
    siblings: list[RunView] = field(default_factory=list)
    # How it ran: in a pre-started sandbox, and with how many ranks a spare interpreter served.
    warm: bool = False
    spare_ranks: int = 0

    def typed(self, kind: type[E]) -> list[tuple[int, E]]:
        """(rank, record) of one kind (`grader.events`) over every rank, typed."""
        return [(r.rank, e) for r in self.ranks for e in r.typed(kind)]

    def rank(self, rank: int) -> RankView | None:
        return next((r for r in self.ranks if r.rank == rank), None)

    def code_at(self, line: int | None) -> str:
        """` (`source line`)` for a message, or ""."""
        lines = self.source.splitlines()
        if line is None or not 0 < line <= len(lines):
            return ""
        text = lines[line - 1].strip()
        if len(text) > 80:
            text = text[:77] + "..."
        return f" (`{text}`)" if text else ""

    def at(self, line: int | None) -> str:
        """ "at line 42 (`code`)" or "": a `Message`, so a sentence that takes it as a parameter
        is translated whole."""
        if not line:
            return ""
        return msg("where.at_line", "at line {line}{code}", line=line, code=self.code_at(line))

    def where(self, line: int | None) -> str:
        """ "at line 42 (`code`)", or "(line unknown)"."""
        return self.at(line) or msg("where.unknown", "(line unknown)")

    @property
    def complete(self) -> bool:
        """Every rank ran the learner's program to its end (exit codes aside)."""
        return bool(self.ranks) and all(r.ended_ok for r in self.ranks)

    def not_reached(self, what: str) -> Outcome | None:
        """A skip for a check whose evidence is missing because the run stopped early. `what`
        made with `grader.i18n.msg` is translated with the sentence; a plain string is quoted as
        it is."""
        if self.complete:
            return None
        return Outcome(
            "skip", msg("run.not_reached", "Not judged: the run stopped before {what}.", what=what)
        )


CheckFn = Callable[[RunView, dict[str, Any]], Outcome]


@dataclass
class CheckDef:
    id: str
    title: str
    hint: str
    fn: CheckFn


_REGISTRY: dict[str, CheckDef] = {}
_loaded = False


def check(check_id: str, *, title: str, hint: str) -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        _REGISTRY[check_id] = CheckDef(check_id, title, hint, fn)
        return fn

    return register


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    # The modules beside this one, found on disk: the registry never imports its own package.
    package = __name__.rpartition(".")[0]
    for info in pkgutil.iter_modules([os.path.dirname(__file__)]):
        if info.name != "base" and not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")
    _loaded = True


def get_check(check_id: str) -> CheckDef | None:
    _load_all()
    return _REGISTRY.get(check_id)


def all_checks() -> dict[str, CheckDef]:
    _load_all()
    return dict(_REGISTRY)


def first_optimizer(steps: list[Step]) -> list[Step]:
    """The steps among `steps` of the first optimizer that stepped."""
    return [e for e in steps if e.opt == steps[0].opt] if steps else []


def ranks_text(ranks: list[int]) -> str:
    """[0] -> "rank 0"; [0, 1] -> "ranks 0 and 1"; [0, 1, 2] -> "ranks 0, 1 and 2"."""
    ranks = sorted(ranks)
    if len(ranks) == 1:
        return msg("where.one_rank", "rank {rank}", rank=ranks[0])
    first = ", ".join(map(str, ranks[:-1]))
    return msg("where.ranks", "ranks {first} and {last}", first=first, last=ranks[-1])


def index_ranges(indices: list[int], limit: int = 3) -> str:
    """[0..99, 140, 141] -> "0-99, 140-141"; past `limit` spans, "... and 4 more ranges" (a
    message, translated with the sentence that quotes it)."""
    values = sorted(set(indices))
    if not values:
        return ""
    spans: list[tuple[int, int]] = []
    start = prev = values[0]
    for v in values[1:]:
        if v != prev + 1:
            spans.append((start, prev))
            start = v
        prev = v
    spans.append((start, prev))
    shown = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans[:limit])
    more = len(spans) - limit
    if more <= 0:
        return shown
    if more == 1:
        return msg("where.one_more_range", "{ranges} and 1 more range", ranges=shown)
    return msg("where.more_ranges", "{ranges} and {more} more ranges", ranges=shown, more=more)


_STACK_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def stack_line(stack: str | None, learner_file: str | None) -> int | None:
    """The innermost line of the learner's file in a faulthandler dump (most recent call first)."""
    if not stack or not learner_file:
        return None
    for m in _STACK_LINE.finditer(stack):
        if m.group("file") == learner_file:
            return int(m.group("line"))
    return None
