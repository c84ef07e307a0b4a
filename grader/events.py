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
from typing import Any, ClassVar, Self, TypedDict, TypeVar

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


# --- DDP, data and the process group (hooks ddp, data, dist, cuda; checks ddp, sampler) ------
# (section g1: field types still to be narrowed from Any)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Barrier(Event):
    KIND = "barrier"
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class BarrierEnter(Event):
    KIND = "barrier_enter"
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectiveCall(Event):
    # more fields passed as **kwargs by the hook: to be declared
    KIND = "collective_call"
    i: Any = None
    line: Any = None
    step: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectiveCalls(Event):
    KIND = "collective_calls"
    n: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Collectives(Event):
    KIND = "collectives"
    counts: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Consumed(Event):
    KIND = "consumed"
    batches: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdpForward(Event):
    KIND = "ddp_forward"
    line: Any = None
    steps: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdpInit(Event):
    # more fields passed as **kwargs by the hook: to be declared
    KIND = "ddp_init"
    index: Any = None
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdpSummary(Event):
    KIND = "ddp_summary"
    forwards: Any = None
    synced_forwards: Any = None
    no_sync: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Destroy(Event):
    KIND = "destroy"
    line: Any = None
    group: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Init(Event):
    KIND = "init"
    requested: Any = None
    backend: Any = None
    rank: Any = None
    world_size: Any = None
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class InitError(Event):
    KIND = "init_error"
    requested: Any = None
    error: Any = None
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Iteration(Event):
    # more fields passed as **kwargs by the hook: to be declared
    KIND = "iteration"


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoSync(Event):
    KIND = "no_sync"
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SetDevice(Event):
    KIND = "set_device"
    device: Any = None
    index: Any = None
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SetEpoch(Event):
    KIND = "set_epoch"
    epoch: Any = None
    sampler_id: Any = None
    line: Any = None


# --- Checkpoints, optimizer steps, losses, replay (hooks ckpt, optim, losses, amp, replay) ---
# (section g4: field types still to be narrowed from Any)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClosureLoss(Event):
    KIND = "closure_loss"
    call: Any = None
    step: Any = None
    loss: Any = None
    line_search: Any = None
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fault(Event):
    # more fields passed as **kwargs by the hook: to be declared
    KIND = "fault"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Load(Event):
    KIND = "load"
    path: Any = None
    line: Any = None
    ok: Any = None
    error: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rename(Event):
    KIND = "rename"
    src: Any = None
    dst: Any = None
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Replay(Event):
    # more fields passed as **kwargs by the hook: to be declared
    KIND = "replay"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Save(Event):
    # more fields passed as **kwargs by the hook: to be declared
    KIND = "save"
    path: Any = None
    line: Any = None
    ok: Any = None
    error: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step(Event):
    # more fields passed as **kwargs by the hook: to be declared
    KIND = "step"


# --- Hand-written all-reduce, the launch environment (hooks allreduce, launch) -------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvWrite(Event):
    """The program set (or deleted: `value` None) one of the launcher's variables in os.environ;
    `before` is the value it replaced, `launched` the one torchrun started the rank with."""

    KIND = "env_write"
    key: str = ""
    value: str | None = None
    before: str | None = None
    launched: str | None = None
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class HandGrads(Event):
    """The gradient around the first update of a program that averages by hand, per tracked
    parameter (`names`, `shapes`), as sketches (`grader.harness.hooks.allreduce.sketch`: the sum
    and a few random projections of each tensor; an empty row for a missing gradient).

    `local`: the mean over this rank's micro-steps of its own unscaled loss's gradient; `used`:
    the gradient the update read (at `read_at`: "step", "zero_grad" or "the next backward
    pass"); `n_losses`: the losses back-propagated before it; `world_scaled`: whether a factor
    taken off the loss was one over the world size."""

    KIND = "hand_grads"
    line: int | None = None
    names: list[str] = dataclasses.field(default_factory=list)
    shapes: list[list[int]] = dataclasses.field(default_factory=list)
    in_optimizer: list[bool] = dataclasses.field(default_factory=list)
    local: list[list[float]] = dataclasses.field(default_factory=list)
    used: list[list[float]] = dataclasses.field(default_factory=list)
    n_losses: int = 1
    world_scaled: bool = False
    read_at: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class InitArgs(Event):
    """The arguments the program itself gave `init_process_group` (`rank` and `world_size` as
    passed, None when left out; `store`: whether it passed one), and the MASTER_ADDR and
    MASTER_PORT in the environment at that moment."""

    KIND = "init_args"
    line: int | None = None
    init_method: str | None = None
    rank: int | None = None
    world_size: int | None = None
    store: bool = False
    master_addr: str | None = None
    master_port: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class LaunchEnv(Event):
    """The launcher's variables as the rank started (None: not set), before the program ran."""

    KIND = "launch_env"
    rank: str | None = None
    local_rank: str | None = None
    world_size: str | None = None
    local_world_size: str | None = None
    group_rank: str | None = None  # the node's index
    master_addr: str | None = None
    master_port: str | None = None
    torchelastic_restart_count: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spawn(Event):
    """The program called mp.spawn / start_processes (the hook stops it there)."""

    KIND = "spawn"
    line: int | None = None
    nprocs: int = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class Weights(Event):
    """Before the `i`-th backward pass (1, 2, ...): a digest and the sum of the tracked weights."""

    KIND = "weights"
    i: int = 0
    digest: str | None = None
    sum: float = 0.0


# --- ZeRO, SyncBatchNorm, accumulation, evaluation (hooks zero, syncbn, accum, evaluate) -----


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccumStep(Event):
    """One optimizer step of a run with an `accum.*` check: the forward passes through the DDP
    model (`micro`) and the gradient all-reduces DDP launched (`reductions`) since the step
    before."""

    KIND = "accum_step"
    n: int = 0  # 1-based step number on this rank
    micro: int = 0
    reductions: int = 0
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class BnStats(Event):
    """A SyncBatchNorm layer's running statistics after one of its training forwards: `mean` and
    `var` are digests of the exact bytes, `mean_sum` and `var_sum` their sums (for a tolerance)."""

    KIND = "bn_stats"
    layer: str = "?"  # the layer's name in the DDP-wrapped model
    step: int = 0  # optimizer steps this rank had taken
    device: str = ""
    batches: int = 0  # num_batches_tracked
    mean: str | None = None
    var: str | None = None
    mean_sum: float = 0.0
    var_sum: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConsolidateEnter(Event):
    KIND = "consolidate_enter"
    line: int | None = None
    to: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConsolidateExit(Event):
    KIND = "consolidate_exit"
    line: int | None = None
    to: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdpBatchnorm(Event):
    """The BatchNorm layers of a model as DDP wrapped it: plain ones ("name (BatchNorm1d)") and
    SyncBatchNorm ones, the names capped, the counts not."""

    KIND = "ddp_batchnorm"
    line: int | None = None
    plain: list[str] = dataclasses.field(default_factory=list)
    n_plain: int = 0
    synced: list[str] = dataclasses.field(default_factory=list)
    n_synced: int = 0
    device: str = "?"  # DDP's device type


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalRows(Event):
    """What a rank fed its models with gradients off: one short hash per sample (capped)."""

    KIND = "eval_rows"
    rows: list[str] = dataclasses.field(default_factory=list)
    forwards: int = 0
    line: int | None = None  # the first such forward


class StateComparison(TypedDict, total=False):
    """A saved optimizer state against the live one when it was saved, over the parameters whose
    state the rank holds; the first stale parameter's step counts, if any."""

    compared: int
    stale: int
    param: int | None  # the first stale parameter's index
    saved_step: float | None
    live_step: float | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class OptimizerState(Event):
    """An optimizer state dict inside an object `torch.save` wrote while a ZeroRedundancyOptimizer
    existed: the parameters it lists and holds state for, out of all of ZeRO's parameters."""

    KIND = "optimizer_state"
    line: int | None = None
    path: str | None = None  # absolute; None when saved to a buffer
    where: str = ""  # its place in the saved object, e.g. "['optimizer']"
    listed: int = 0
    stated: int = 0
    n_params: int = 0
    load_error: str | None = None  # why it does not load into a fresh optimizer; None if it does
    live: StateComparison = dataclasses.field(default_factory=StateComparison)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyncbnConvert(Event):
    """A (top-level) call of `SyncBatchNorm.convert_sync_batchnorm`."""

    KIND = "syncbn_convert"
    line: int | None = None
    arg: str = ""  # the class of the module converted
    is_ddp: bool = False  # the module was a DDP wrapper
    inside_ddp: bool = True  # the module was (inside) a model already wrapped in DDP
    n_plain: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyncbnCpu(Event):
    """A SyncBatchNorm forward on CPU input, run as a per-rank BatchNorm (recorded once)."""

    KIND = "syncbn_cpu"
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ZeroInit(Event):
    """A ZeroRedundancyOptimizer built; only `line` and `error` when reading it failed."""

    KIND = "zero_init"
    line: int | None = None
    optimizer: str | None = None  # the class it wraps, e.g. "Adam"
    n_params: int = 0
    n_local: int | None = None  # the parameters whose state this rank holds
    error: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ZeroStateDict(Event):
    """A call of ZeroRedundancyOptimizer.state_dict(): it raises unless consolidated first."""

    KIND = "zero_state_dict"
    line: int | None = None
    ok: bool = False
    listed: int = 0
    stated: int = 0
    error: str | None = None
