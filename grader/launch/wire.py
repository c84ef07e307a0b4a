"""What crosses the sandbox boundary, as types: the only module both the host side
(`grader.launch`) and what runs in the sandbox (`grader.inside`, `grader.harness`) import.

One launch, the hand-overs in order:
- host -> supervisor: `SupervisorConfig`, a JSON file in the job dir (`.rdv-config-*.json`),
  with the `HarnessSettings` the supervisor hands each rank in `$RDV_HARNESS`;
- supervisor -> host, while it runs: `Frame`s, one JSON line each on stdout after
  `FRAME<nonce>:` (anything else on stdout is noise); a warm supervisor first says `READY`;
- supervisor -> node agent -> supervisor (a simulated multi-node job): `NodeSpec` and
  `NodeResult`, JSON files;
- supervisor -> host, at the end: `Report` (one `RankReport` per rank), `.rdv-report-<nonce>.json`.

Stdlib only (the supervisor and every rank import it before torch). Each type has
`to_dict()`/`from_dict()` (and `to_json()`/`from_json()`); `from_dict` refuses a payload of the
wrong shape with a `WireError` that names the type and the field. A missing optional field takes
its default, as the payloads of older supervisors had fewer fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

FRAME = "\x1eRDV:"
READY = "\x1eRDV-READY"
REPORT_VERSION = 1

T = TypeVar("T")
_REQUIRED: Any = object()


class WireError(ValueError):
    """A payload that is not the type it should be: names the type and the field."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where


class _Reader:
    """Typed reads of one JSON object's fields, each error naming `type.field`."""

    def __init__(self, type_name: str, data: object) -> None:
        if not isinstance(data, Mapping):
            raise WireError(type_name, f"expected a JSON object, got {type(data).__name__}")
        self.type_name = type_name
        self.data = data

    def _raw(self, name: str, default: Any) -> Any:
        if name in self.data and self.data[name] is not None:
            return self.data[name]
        if default is _REQUIRED:
            raise WireError(f"{self.type_name}.{name}", "missing")
        return default

    def _bad(self, name: str, expected: str, value: object) -> WireError:
        return WireError(f"{self.type_name}.{name}", f"expected {expected}, got {value!r:.80}")

    def integer(self, name: str, default: Any = _REQUIRED) -> Any:
        value = self._raw(name, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(name, "an integer", value)
        return value

    def number(self, name: str, default: Any = _REQUIRED) -> Any:
        value = self._raw(name, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._bad(name, "a number", value)
        return float(value)

    def flag(self, name: str, default: bool = False) -> bool:
        value = self._raw(name, default)
        if not isinstance(value, bool):
            raise self._bad(name, "true or false", value)
        return value

    def text(self, name: str, default: Any = _REQUIRED) -> Any:
        value = self._raw(name, default)
        if value is not default and not isinstance(value, str):
            raise self._bad(name, "a string", value)
        return value

    def texts(self, name: str) -> tuple[str, ...]:
        value = self._raw(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._bad(name, "a list of strings", value)
        return tuple(value)

    def text_map(self, name: str) -> dict[str, str]:
        value = self._raw(name, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self._bad(name, "an object of strings", value)
        return dict(value)

    def obj(self, name: str) -> dict[str, Any]:
        value = self._raw(name, {})
        if not isinstance(value, Mapping):
            raise self._bad(name, "a JSON object", value)
        return dict(value)

    def objs(self, name: str) -> list[dict[str, Any]]:
        value = self._raw(name, [])
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise self._bad(name, "a list of JSON objects", value)
        return [dict(v) for v in value]


def _loads(type_name: str, text: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise WireError(type_name, f"not JSON: {exc}") from exc


def _dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


@dataclass(frozen=True)
class PlacedFault:
    """A fault the harness injects into one rank, placed by `grader.launch.faults` from the
    uninterrupted reference run: stop `rank` on `attempt` after `after_steps` optimizer steps,
    exiting with `exit_code`. `placed` and the reference figures say how it was placed."""

    rank: int = 1
    attempt: int = 0
    kind: str = "exit"
    after: str = "snapshot"
    after_steps: int = 1
    exit_code: int = 1
    placed: str | None = None
    reference_steps: int = 0
    snapshot_step: int | None = None
    snapshot_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> PlacedFault:
        r = _Reader("PlacedFault", data)
        return cls(
            rank=r.integer("rank", 1),
            attempt=r.integer("attempt", 0),
            kind=r.text("kind", "exit"),
            after=r.text("after", "snapshot"),
            after_steps=r.integer("after_steps", 1),
            exit_code=r.integer("exit_code", 1),
            placed=r.text("placed", None),
            reference_steps=r.integer("reference_steps", 0),
            snapshot_step=r.integer("snapshot_step", None),
            snapshot_path=r.text("snapshot_path", None),
        )


@dataclass(frozen=True)
class HarnessSettings:
    """What every rank's harness is told ($RDV_HARNESS): the process group timeout the hooks
    allow, the faults to inject, the check ids of the exercise (a costly hook observes only when
    a check needs it; None: every hook observes) and how many sampler indices to record."""

    pg_timeout_seconds: float = 30.0
    faults: tuple[PlacedFault, ...] = ()
    checks: tuple[str, ...] | None = None
    max_indices: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "pg_timeout_seconds": self.pg_timeout_seconds,
            "faults": [f.to_dict() for f in self.faults],
        }
        if self.checks is not None:
            data["checks"] = list(self.checks)
        if self.max_indices is not None:
            data["max_indices"] = self.max_indices
        return data

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: object) -> HarnessSettings:
        r = _Reader("HarnessSettings", data)
        return cls(
            pg_timeout_seconds=r.number("pg_timeout_seconds", 30.0),
            faults=tuple(PlacedFault.from_dict(f) for f in r.objs("faults")),
            checks=r.texts("checks") if r.data.get("checks") is not None else None,
            max_indices=r.integer("max_indices", None),
        )

    @classmethod
    def from_json(cls, text: str) -> HarnessSettings:
        return cls.from_dict(_loads("HarnessSettings", text))


@dataclass(frozen=True)
class SupervisorConfig:
    """One launch as the in-sandbox supervisor runs it. `nonce` names the report and marks the
    frames (the learner's code never learns it: the file is deleted once read). `env` and
    `env_unset`: the job's own variables, for a warm supervisor started before the job."""

    nonce: str
    world_size: int
    wall_seconds: float
    output_cap: int
    nnodes: int = 1
    max_restarts: int = 0
    script_args: tuple[str, ...] = ()
    sandboxed: bool = False
    harness: HarnessSettings = field(default_factory=HarnessSettings)
    env: Mapping[str, str] = field(default_factory=dict)
    env_unset: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "nonce": self.nonce,
            "world_size": self.world_size,
            "nnodes": self.nnodes,
            "max_restarts": self.max_restarts,
            "script_args": list(self.script_args),
            "wall_seconds": self.wall_seconds,
            "output_cap": self.output_cap,
            "sandboxed": self.sandboxed,
            "harness": self.harness.to_dict(),
            "env": dict(self.env),
            "env_unset": list(self.env_unset),
        }

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: object) -> SupervisorConfig:
        r = _Reader("SupervisorConfig", data)
        return cls(
            nonce=r.text("nonce"),
            world_size=r.integer("world_size"),
            wall_seconds=r.number("wall_seconds"),
            output_cap=r.integer("output_cap"),
            nnodes=r.integer("nnodes", 1),
            max_restarts=r.integer("max_restarts", 0),
            script_args=r.texts("script_args"),
            sandboxed=r.flag("sandboxed"),
            harness=HarnessSettings.from_dict(r.obj("harness")),
            env=r.text_map("env"),
            env_unset=r.texts("env_unset"),
        )

    @classmethod
    def from_json(cls, text: str) -> SupervisorConfig:
        return cls.from_dict(_loads("SupervisorConfig", text))


@dataclass(frozen=True)
class Frame:
    """One framed line on the supervisor's stdout: a line of a rank's output ("output"), the
    supervisor's status ("status": "running"), or the end of its frames ("done")."""

    kind: str
    rank: int | None = None
    line: str | None = None
    status: str | None = None

    def encode(self, nonce: str) -> str:
        data = {k: v for k, v in asdict(self).items() if v is not None}
        return f"{FRAME}{nonce}:{_dumps(data)}\n"

    @classmethod
    def from_dict(cls, data: object) -> Frame:
        r = _Reader("Frame", data)
        return cls(
            kind=r.text("kind"),
            rank=r.integer("rank", None),
            line=r.text("line", None),
            status=r.text("status", None),
        )

    @classmethod
    def decode(cls, line: str, nonce: str) -> Frame | None:
        """The frame on `line`; None for anything else (the program's own output, a frame with
        another nonce, a damaged frame)."""
        prefix = f"{FRAME}{nonce}:"
        if not line.startswith(prefix):
            return None
        try:
            return cls.from_dict(json.loads(line[len(prefix) :]))
        except ValueError:
            return None


@dataclass(frozen=True)
class RankReport:
    """What one rank did: its exit code (None: still running when stopped, or unknown), its
    output (the last `output_cap` bytes), its Python stacks when stopped, and its trace records
    (JSON objects, read on the host only through the typed records of `grader.events`)."""

    rank: int
    exit_code: int | None = None
    output: str = ""
    truncated: bool = False
    output_bytes: int = 0
    stack: str | None = None
    events: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["events"] = list(self.events)
        return data

    @classmethod
    def from_dict(cls, data: object) -> RankReport:
        r = _Reader("RankReport", data)
        return cls(
            rank=r.integer("rank"),
            exit_code=r.integer("exit_code", None),
            output=r.text("output", ""),
            truncated=r.flag("truncated"),
            output_bytes=r.integer("output_bytes", 0),
            stack=r.text("stack", None),
            events=tuple(r.objs("events")),
        )


@dataclass(frozen=True)
class Report:
    """The supervisor's account of one launch. `launch_error`: torch's launcher failed (a
    platform fault); `inspect_error`: the checkpoint inspection failed (its traceback);
    `checkpoints`: what the inspection found, by path."""

    world_size: int = 0
    timed_out: bool = False
    launch_error: str | None = None
    inspect_error: str | None = None
    ranks: tuple[RankReport, ...] = ()
    checkpoints: Mapping[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    spare_ranks: int = 0
    version: int = REPORT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "world_size": self.world_size,
            "timed_out": self.timed_out,
            "launch_error": self.launch_error,
            "inspect_error": self.inspect_error,
            "ranks": [r.to_dict() for r in self.ranks],
            "checkpoints": dict(self.checkpoints),
            "duration_s": self.duration_s,
            "spare_ranks": self.spare_ranks,
        }

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: object) -> Report:
        r = _Reader("Report", data)
        return cls(
            version=r.integer("version", REPORT_VERSION),
            world_size=r.integer("world_size", 0),
            timed_out=r.flag("timed_out"),
            launch_error=r.text("launch_error", None),
            inspect_error=r.text("inspect_error", None),
            ranks=tuple(RankReport.from_dict(x) for x in r.objs("ranks")),
            checkpoints=r.obj("checkpoints"),
            duration_s=r.number("duration_s", 0.0),
            spare_ranks=r.integer("spare_ranks", 0),
        )

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls.from_dict(_loads("Report", text))


@dataclass(frozen=True)
class NodeSpec:
    """One agent of a simulated multi-node job (`python -m grader.inside.multinode SPEC.json`):
    its node index, the rendezvous (`port`, `run_id`), where its ranks' logs go, the rank
    entrypoint's arguments, and the file its `NodeResult` goes to."""

    node: int
    nnodes: int
    nproc_per_node: int
    port: int
    run_id: str
    log_dir: str
    result: str
    args: tuple[str, ...] = ()
    max_restarts: int = 0

    def to_json(self) -> str:
        data = asdict(self)
        data["args"] = list(self.args)
        return _dumps(data)

    @classmethod
    def from_dict(cls, data: object) -> NodeSpec:
        r = _Reader("NodeSpec", data)
        return cls(
            node=r.integer("node"),
            nnodes=r.integer("nnodes"),
            nproc_per_node=r.integer("nproc_per_node"),
            port=r.integer("port"),
            run_id=r.text("run_id"),
            log_dir=r.text("log_dir"),
            result=r.text("result"),
            args=r.texts("args"),
            max_restarts=r.integer("max_restarts", 0),
        )

    @classmethod
    def from_json(cls, text: str) -> NodeSpec:
        return cls.from_dict(_loads("NodeSpec", text))


@dataclass(frozen=True)
class NodeResult:
    """How one node's agent ended: the exit code of each failed global rank, or the agent's own
    error, and how many ranks its zygote forked."""

    failures: Mapping[int, int | None] = field(default_factory=dict)
    error: str | None = None
    spare_ranks: int = 0

    def to_json(self) -> str:
        data: dict[str, Any] = {"failures": {str(k): v for k, v in self.failures.items()}}
        if self.error is not None:
            data["error"] = self.error
        data["spare_ranks"] = self.spare_ranks
        return _dumps(data)

    @classmethod
    def from_dict(cls, data: object) -> NodeResult:
        r = _Reader("NodeResult", data)
        failures: dict[int, int | None] = {}
        for key, code in r.obj("failures").items():
            if not key.lstrip("-").isdigit() or not (code is None or type(code) is int):
                raise WireError("NodeResult.failures", f"bad entry {key!r}: {code!r:.40}")
            failures[int(key)] = code
        return cls(
            failures=failures, error=r.text("error", None), spare_ranks=r.integer("spare_ranks", 0)
        )

    @classmethod
    def from_json(cls, text: str) -> NodeResult:
        return cls.from_dict(_loads("NodeResult", text))


@dataclass(frozen=True)
class SpareHandover:
    """A rank handed over (grader.inside.spares): what it becomes, sent over a Unix socket with
    its descriptors 0, 1 and 2, from the rank shim to the server and from the server to the
    zygote (a rank, or a multi-node job's node agent). The rank shim (grader/inside/rank_shim.py,
    standard library only, no grader import) writes the same three fields."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str

    def to_json(self) -> str:
        return _dumps({"argv": list(self.argv), "env": dict(self.env), "cwd": self.cwd})

    @classmethod
    def from_dict(cls, data: object) -> SpareHandover:
        r = _Reader("SpareHandover", data)
        return cls(argv=r.texts("argv"), env=r.text_map("env"), cwd=r.text("cwd"))

    @classmethod
    def from_json(cls, text: str | bytes) -> SpareHandover:
        raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return cls.from_dict(_loads("SpareHandover", raw))
