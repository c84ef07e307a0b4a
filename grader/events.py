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


# --- DDP, data and the process group (hooks ddp, data, dist, cuda; checks ddp, sampler) ------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Init(Event):
    """init_process_group returned: the group this rank joined."""

    KIND = "init"
    requested: str | None = None  # the backend the program asked for (None: torch's default)
    backend: str | None = None  # the backend torch chose (None: it could not say)
    rank: int | None = None
    world_size: int | None = None
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class InitError(Event):
    """init_process_group raised (the exception goes on to the program)."""

    KIND = "init_error"
    requested: str | None = None
    error: str = ""  # repr of the exception, at most 500 characters
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Destroy(Event):
    KIND = "destroy"
    line: int | None = None
    group: bool = False  # a group was passed (only that group was destroyed)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectiveCall(Event):
    """One Python-level collective, recorded before it runs (a rank that hangs in it is still on
    record). Only calls from the learner's file, at most `MAX_CALL_EVENTS` per rank."""

    KIND = "collective_call"
    i: int = 0  # 1-based count of the rank's collective calls
    line: int | None = None
    step: int = 0  # optimizer steps taken before the call
    op: str = ""  # the torch.distributed function: "all_reduce", "broadcast", ...
    numel: int | None = None  # elements of the tensors sent (received, for all_gather)
    dtype: str | None = None  # "float32", ...; "-" when the argument was no tensor
    redop: str | None = None  # reduce operation of all_reduce / reduce: "SUM", "AVG", ...
    src: int | None = None  # source rank of broadcast / broadcast_object_list


@dataclasses.dataclass(frozen=True, kw_only=True)
class BarrierEnter(Event):
    KIND = "barrier_enter"
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Barrier(Event):
    """A barrier returned."""

    KIND = "barrier"
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Collectives(Event):
    """At the program's end: collectives completed, per function name."""

    KIND = "collectives"
    counts: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectiveCalls(Event):
    """At the program's end: collectives called from the learner's file (recorded or not)."""

    KIND = "collective_calls"
    n: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdpInit(Event):
    """A DistributedDataParallel was built: what it wraps."""

    KIND = "ddp_init"
    index: int = 0  # the rank's DDP models in order of construction
    line: int | None = None
    compiled: bool = False  # the wrapped module is a torch.compile'd model
    module: str | None = None  # class name of the bare model
    params: int | None = None  # its number of parameter elements
    devices: list[str] = dataclasses.field(default_factory=list)  # of its parameters, sorted
    device_ids: list[str] = dataclasses.field(default_factory=list)  # passed to DDP
    find_unused: bool = False
    keys: list[str] = dataclasses.field(default_factory=list)  # the bare model's state_dict
    shapes: dict[str, list[int]] | None = None  # state_dict key -> shape
    error: str | None = None  # describing the model failed (a harness error is on record)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdpForward(Event):
    """The first forward through any DDP model."""

    KIND = "ddp_forward"
    line: int | None = None
    steps: int = 0  # optimizer steps taken before it


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoSync(Event):
    """The first `no_sync()` context entered."""

    KIND = "no_sync"
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdpSummary(Event):
    """At the program's end: DDP forwards, those that will all-reduce in backward, no_syncs."""

    KIND = "ddp_summary"
    forwards: int = 0
    synced_forwards: int = 0
    no_sync: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Consumed(Event):
    """At the program's end: the samples each training forward through DDP fed the model,
    batch by batch (a short hash per sample, equal across ranks for the same sample)."""

    KIND = "consumed"
    batches: list[list[str]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Iteration(Event):
    """One pass over a DataLoader (or a DistributedSampler iterated directly), written at the
    program's end: the indices it handed out and how its sampler was set up."""

    KIND = "iteration"
    id: int = 0  # the rank's passes in order
    line: int | None = None  # where the pass started
    steps: int = 0  # optimizer steps taken while this pass was the last to hand out indices
    indices: list[int] = dataclasses.field(default_factory=list)  # the first `max_indices`
    count: int = 0  # indices handed out (may exceed len(indices))
    exhausted: bool = False  # the pass ran to the end of its sampler
    sampler: str | None = None  # class name (the real sampler under a BatchSampler)
    sampler_id: int | None = None
    batch_sampler: str | None = None  # class name of the BatchSampler around it, if any
    distributed: bool = False  # a DistributedSampler; the fields below are its settings
    epoch: int | None = None
    num_replicas: int | None = None
    sampler_rank: int | None = None
    shuffle: bool = False
    drop_last: bool = False
    seed: int | None = None
    dataset_len: int | None = None  # the dataset under any Subsets
    loader_len: int | None = None  # what the loader can hand out (a Subset is smaller)
    mapped: bool = False  # indices were mapped through Subsets to the dataset's own
    subset: str | None = None  # fingerprint of the samples the Subsets select (None: no Subset)
    dataset: str | None = None  # fingerprint of the data: "t:..." tensors hashed, "w:..." type
    batch_size: int | None = None
    samples: list[list[float]] = dataclasses.field(default_factory=list)  # a few numbers each


@dataclasses.dataclass(frozen=True, kw_only=True)
class SetEpoch(Event):
    KIND = "set_epoch"
    epoch: int | None = None  # None: not an integer
    sampler_id: int = 0
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SetDevice(Event):
    """torch.cuda.set_device returned."""

    KIND = "set_device"
    device: str = ""  # the argument, as text
    index: int | None = None  # torch.cuda.current_device() afterwards
    line: int | None = None


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
# (section g2: field types still to be narrowed from Any)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvWrite(Event):
    KIND = "env_write"
    key: Any = None
    value: Any = None
    before: Any = None
    launched: Any = None
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class HandGrads(Event):
    KIND = "hand_grads"
    line: Any = None
    names: Any = None
    shapes: Any = None
    in_optimizer: Any = None
    local: Any = None
    used: Any = None
    n_losses: Any = None
    world_scaled: Any = None
    read_at: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class InitArgs(Event):
    KIND = "init_args"
    line: Any = None
    init_method: Any = None
    rank: Any = None
    world_size: Any = None
    store: Any = None
    master_addr: Any = None
    master_port: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class LaunchEnv(Event):
    # more fields passed as **kwargs by the hook: to be declared
    KIND = "launch_env"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spawn(Event):
    KIND = "spawn"
    line: Any = None
    nprocs: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Weights(Event):
    KIND = "weights"
    i: Any = None
    digest: Any = None
    sum: Any = None


# --- ZeRO, SyncBatchNorm, accumulation, evaluation (hooks zero, syncbn, accum, evaluate) -----
# (section g3: field types still to be narrowed from Any)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccumStep(Event):
    KIND = "accum_step"
    n: Any = None
    micro: Any = None
    reductions: Any = None
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class BnStats(Event):
    KIND = "bn_stats"
    layer: Any = None
    step: Any = None
    device: Any = None
    batches: Any = None
    mean: Any = None
    var: Any = None
    mean_sum: Any = None
    var_sum: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConsolidateEnter(Event):
    KIND = "consolidate_enter"
    line: Any = None
    to: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConsolidateExit(Event):
    KIND = "consolidate_exit"
    line: Any = None
    to: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdpBatchnorm(Event):
    KIND = "ddp_batchnorm"
    line: Any = None
    plain: Any = None
    n_plain: Any = None
    synced: Any = None
    n_synced: Any = None
    device: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalRows(Event):
    KIND = "eval_rows"
    rows: Any = None
    forwards: Any = None
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class OptimizerState(Event):
    KIND = "optimizer_state"
    line: Any = None
    path: Any = None
    where: Any = None
    listed: Any = None
    stated: Any = None
    n_params: Any = None
    load_error: Any = None
    live: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyncbnConvert(Event):
    KIND = "syncbn_convert"
    line: Any = None
    arg: Any = None
    is_ddp: Any = None
    inside_ddp: Any = None
    n_plain: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyncbnCpu(Event):
    KIND = "syncbn_cpu"
    line: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ZeroInit(Event):
    KIND = "zero_init"
    line: Any = None
    optimizer: Any = None
    n_params: Any = None
    n_local: Any = None
    error: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ZeroStateDict(Event):
    KIND = "zero_state_dict"
    line: Any = None
    ok: Any = None
    listed: Any = None
    stated: Any = None
    error: Any = None
