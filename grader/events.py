"""The trace events: what the harness's hooks record in a rank and what the checks read back.

One frozen dataclass per event kind, shared by both sides, so a renamed or misspelt field fails
`mypy` instead of a learner. A hook records with `tracer.record(Save(path=..., line=...))`; a
check reads with `rank.typed(Save)` / `run.typed(Save)` (see `grader.checks.base`). The tracer
adds `seq`, `t` and `sync` when it writes a record; `grader.ranklogs` adds `attempt` when it
reads the trace files back.

This module runs inside every rank (the harness imports it before the learner's code), so it
imports nothing beyond the standard library.

Every field has a default: the value its absence means (checks also read synthetic records in
unit tests, and a record from an older harness must still parse).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Self, TypeVar

E = TypeVar("E", bound="Event")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    """Fields every record has: its order in the rank, wall time, collectives completed before
    it (`Tracer.sync`: orders events across ranks) and the torchelastic attempt."""

    KIND: ClassVar[str] = ""

    seq: int = 0
    t: float = 0.0
    sync: int = 0
    attempt: int = 0

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Self:
        """The typed record of one trace line (fields the record lacks take their defaults;
        keys this class does not declare are ignored)."""
        names = _field_names(cls)
        return cls(**{key: value for key, value in raw.items() if key in names})

    def data(self) -> dict[str, Any]:
        """The fields a hook sets (the tracer adds the common ones)."""
        return {name: getattr(self, name) for name in _own_field_names(type(self))}


_NAMES: dict[type, frozenset[str]] = {}
_OWN: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type[Event]) -> frozenset[str]:
    if cls not in _NAMES:
        _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return _NAMES[cls]


def _own_field_names(cls: type[Event]) -> tuple[str, ...]:
    if cls not in _OWN:
        common = _field_names(Event)
        _OWN[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name not in common)
    return _OWN[cls]


def parse_all(cls: type[E], raws: list[dict[str, Any]]) -> list[E]:
    """Every record of `cls.KIND` among `raws`, typed."""
    return [cls.parse(raw) for raw in raws if raw.get("kind") == cls.KIND]


# --- The program's life: start, end, exceptions, the harness's own failures ----------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Start(Event):
    KIND = "start"
    pid: int = 0
    rank: int = 0
    world_size: int = 1
    file: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class End(Event):
    """The program's end: `status` "ok" (ran to its end or exit 0), "exit" (non-zero exit),
    "exception" (an uncaught exception, see `ProgramException`)."""

    KIND = "end"
    status: str = ""
    exit_code: int = 0
    line: int | None = None
    via: str | None = None  # "os._exit" when the program left that way


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProgramException(Event):
    KIND = "exception"
    type: str = ""
    message: str = ""
    traceback: str = ""
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class HarnessError(Event):
    KIND = "harness_error"
    where: str = "?"
    error: str = ""
    traceback: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Terminated(Event):
    """The launcher stopped the rank while the hooks did their end-of-program work."""

    KIND = "terminated"
    where: str = "?"
    error: str = ""
