"""The trace events: what the harness's hooks record in a rank and what the checks read back.

One frozen dataclass per event kind, shared by both sides, so a renamed or misspelt field fails
`mypy` instead of a learner. A hook records with `tracer.record(Save(path=..., line=...))`; a
check reads with `rank.typed(Save)` / `run.typed(Save)` (see `grader.checks.base`). The tracer
adds `seq`, `t` and `sync` when it writes a record; `grader.inside.ranklogs` adds `attempt` when it
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
        """The fields a hook sets (the tracer adds the common ones), as plain JSON values."""
        return {name: _plain(getattr(self, name)) for name in _own_field_names(type(self))}

    def record(self) -> dict[str, Any]:
        """The whole trace record, kind and common fields included (for records written
        outside a rank's tracer, e.g. the supervisor's `Fatal`)."""
        common = {name: getattr(self, name) for name in _field_names(Event)}
        return {"kind": self.KIND, **common, **self.data()}


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


def _plain(value: Any) -> Any:
    """A field's value for JSON: a nested record (e.g. `SavedStateDict`) becomes a dict."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def parse_all(cls: type[E], raws: list[dict[str, Any]]) -> list[E]:
    """Every record of `cls.KIND` among `raws`, typed."""
    return [cls.parse(raw) for raw in raws if raw.get("kind") == cls.KIND]


def parse_kinds(raws: list[dict[str, Any]], *kinds: type[Event]) -> list[Event]:
    """Every record of any of `kinds` among `raws`, typed, in their order (tell them apart with
    isinstance)."""
    by_kind = {kind.KIND: kind for kind in kinds}
    return [by_kind[raw["kind"]].parse(raw) for raw in raws if raw.get("kind") in by_kind]


# --- The program's life: start, end, exceptions, the harness's own failures ----------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Start(Event):
    KIND = "start"
    pid: int = 0
    rank: int = 0
    world_size: int = 1
    file: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TorchInternals(Event):
    """The torch this rank ran, and the torch internals the harness reads that it lacks
    (`grader.torch_internals`): the hooks that read them were left out, and the checks judged
    from those hooks say "not judged" instead of misjudging."""

    KIND = "torch_internals"
    version: str = ""
    missing: list[str] = dataclasses.field(default_factory=list)


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
    # Called by the learner's file itself, not by torch code it called (Join's and DDP's own
    # collectives are recorded with the learner's line too, but are not the learner's calls).
    direct: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectiveDone(Event):
    """Collective `i` (its `CollectiveCall`) completed on this rank: the call returned or, for a
    call made with `async_op=True`, a wait on its handle (`Work.wait`, its future's `wait`,
    `torch.futures.wait_all`) returned (`waited`). `t` is that moment: with the call's `t`, the
    collective's bar on the result's timeline (`grader.timeline`)."""

    KIND = "collective_done"
    i: int = 0
    waited: bool = False  # an async call's handle was waited on (else the call itself returned)
    line: int | None = None  # the learner's line of the wait (async calls)


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class SavedStateDict:
    """One str -> tensor mapping inside a saved object (`Save.state_dicts`), judged against the
    bare model it fits best of every DDP wrap made before the save. Not an event of its own."""

    where: str = ""  # its place in the saved object: "(the saved object)", "['model']", ...
    n: int = 0  # how many keys
    prefixed: int = 0  # keys starting with DDP's "module."
    compiled_prefixed: int = 0  # keys holding torch.compile's "_orig_mod."
    sample: list[str] = dataclasses.field(default_factory=list)  # the first few keys
    model: bool = False  # it is a model's state_dict (most of a bare model's keys, prefixes aside)
    # Against that bare model (empty, and `loadable` None, when no DDP model was made):
    missing: list[str] = dataclasses.field(default_factory=list)
    unexpected: list[str] = dataclasses.field(default_factory=list)
    n_missing: int = 0
    n_unexpected: int = 0
    shape_mismatch: list[str] = dataclasses.field(default_factory=list)
    loadable: bool | None = None  # loads into a fresh bare model (keys and shapes)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> SavedStateDict:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in raw.items() if key in names})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Save(Event):
    """A `torch.save` returned (`ok`) or raised (`error`): what the saved object holds."""

    KIND = "save"
    path: str | None = None  # absolute; None for a buffer or an unnamed file object
    # Where it went: "path" (a file name), "file" (a file object open on disk), "memory" (an
    # io.BytesIO or another object that is no file: serialisation, not a write to storage),
    # "dcp" (a torch.distributed.checkpoint writer; `path` is its checkpoint directory).
    target: str = "path"
    line: int | None = None
    ok: bool = False  # the hook always writes it: a save not known to have completed did not
    error: str | None = None
    type: str = ""  # the saved object's class name
    holds: str = ""  # "ddp" (the wrapper itself), "module", "state" (state dicts), "other"
    model_state: bool = False  # it holds the model's weights (any layout)
    state_dicts: list[SavedStateDict] = dataclasses.field(default_factory=list)
    began: float | None = None  # wall time the write began (`t`: when it returned)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Self:
        event = super().parse(raw)
        dicts = [
            sd if isinstance(sd, SavedStateDict) else SavedStateDict.parse(sd)
            for sd in event.state_dicts
            if isinstance(sd, (SavedStateDict, Mapping))
        ]
        return dataclasses.replace(event, state_dicts=dicts)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Load(Event):
    KIND = "load"
    path: str | None = None
    line: int | None = None
    ok: bool = False
    error: str | None = None
    began: float | None = None  # wall time the read began (`t`: when it returned)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rename(Event):
    """`os.replace` / `os.rename` returned: a file moved into place (absolute paths)."""

    KIND = "rename"
    src: str | None = None
    dst: str | None = None
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step(Event):
    """An optimizer step returned: a digest of the parameters it updated."""

    KIND = "step"
    opt: int = 0  # which optimizer, in the order they first stepped
    n: int = 0  # its own step count (1 for its first step)
    digest: str = ""  # a hash of every parameter of its param groups
    sums: list[float] = dataclasses.field(default_factory=list)  # per tensor (the first 64)
    squares: list[float] = dataclasses.field(default_factory=list)  # sums of squares
    # Only on an optimizer's first step:
    names: list[str] | None = None  # the parameters' names in the DDP model ("param3" if not)
    ddp_frac: float | None = None  # the share of its parameters that belong to a DDP model
    line: int | None = None
    optimizer: str | None = None  # its class name
    began: float | None = None  # wall time the step began (`t`: when it returned)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClosureLoss(Event):
    """The loss an `optimizer.step(closure)` with a line search got back from the closure."""

    KIND = "closure_loss"
    call: int = 0  # the closure's call count in this rank (from 1)
    step: int = 0  # optimizer steps taken before it
    loss: float = 0.0
    line_search: str = ""  # the optimizer's line_search_fn
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fault(Event):
    """The harness stopped this rank as the exercise asks (the placed `grader.contract.FaultSpec`,
    see `grader.launch.faults`), right after its optimizer step `after_steps`."""

    KIND = "fault"
    rank: int = 1
    attempt: int = 0
    after: str = "snapshot"  # "snapshot" or "steps"
    after_steps: int = 0  # the rank's optimizer steps (every optimizer's) when it was stopped
    exit_code: int = 1
    # How `grader.launch.faults` placed it: "snapshot", "steps", "no_steps", "no_snapshot",
    # "late_snapshot"; None when it was not placed from a reference run.
    placed: str | None = None
    reference_steps: int = 0  # the rank's steps in the uninterrupted reference run
    snapshot_step: int | None = None  # its steps when the reference's first snapshot was written
    snapshot_path: str | None = None  # where that snapshot ended up


@dataclasses.dataclass(frozen=True, kw_only=True)
class Replay(Event):
    """Rank 0's replay of one sampled optimizer step (`grader.harness.replay`; one event per
    window, in step order): the gradient every rank's micro-steps say it should have used against
    the one it used. Per-rank maps are keyed by the rank as a string (they went through JSON)."""

    KIND = "replay"
    status: str = ""  # "ok", "zero_gradient" or "unavailable" (see `reason`)
    reason: str | None = None
    step: int = 1  # rank 0's optimizer step that ended the window (1 = the first)
    # The window's first backward began with gradients of an earlier step still there.
    carried: bool = False
    world_size: int | None = None
    rel_error: float = 0.0  # |after-backward - expected| / |expected|
    ratio: float = 1.0  # the after-backward gradient as a multiple of the expected one
    norm_expected: float = 0.0
    norm_actual: float = 0.0
    worst_param: str | None = None  # the parameter furthest from its expected gradient
    micro_steps: dict[str, int] = dataclasses.field(default_factory=dict)
    synced_micro_steps: dict[str, int] = dataclasses.field(default_factory=dict)
    # Per rank, per micro-step: the gradients that reached each standard loss function's value
    # (the factors put on the loss), and the constant factor applied last before backward.
    loss_scales: dict[str, list[list[float]]] = dataclasses.field(default_factory=dict)
    root_scales: dict[str, list[float | None]] = dataclasses.field(default_factory=dict)
    # Per rank, per micro-step: how much of one mean loss it back-propagated (1 for a mean; the
    # sum of a window's is 1 when the step is the window's mean; `grader.harness.loss_weight`).
    loss_weights: dict[str, list[float | None]] = dataclasses.field(default_factory=dict)
    backward_lines: dict[str, list[int | None]] = dataclasses.field(default_factory=dict)
    amp_scale: float | None = None  # rank 0's GradScaler scale, when one scaled the loss
    # The optimizer's gradient as a multiple of the after-backward one, and whether it lies on
    # that line (clipping, unscaling and a divided gradient keep it there).
    step_ratio: float = 1.0
    step_parallel: bool = True
    clipped: bool = False
    # The stepped gradient against the mean over every micro-step of every rank of the gradient
    # of its unscaled loss (`grader.harness.micro_mean`): "ok" or "unavailable".
    mean_status: str = ""
    micro_total: int = 0
    loss_weight: float = 0.0  # the sum over every micro-step of every rank (GradScaler included)
    mean_rel_error: float = 0.0
    mean_ratio: float = 1.0
    mean_cosine: float = 1.0
    norm_mean: float = 0.0
    norm_stepped: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class HandCarry(Event):
    """A program that averages by hand began its first backward after its first update: whether
    the gradients of that update were still there (nothing cleared them), so that every later
    update would add up all earlier gradients (`grader.harness.hooks.allreduce`)."""

    KIND = "hand_carry"
    carried: bool = False
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fatal(Event):
    """Written by the supervisor, not a hook: the rank's faulthandler dump says it died of a fatal
    error (an abort in C++ code, a segfault); `t` is when the dump was last written."""

    KIND = "fatal"
    error: str = ""


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardedStep(Event):
    """zero-by-hand (issue 37): one training step of a hand-sharded optimizer, judged when the
    next forward through the DDP model starts (or the program ends): the model's parameters
    against an unsharded optimizer of the same class stepped with the same gradients, and the
    bytes of optimizer state this rank keeps against that optimizer's."""

    KIND = "sharded_step"
    n: int = 0  # 1-based count of the rank's judged steps
    line: int | None = None  # where the step's first optimizer.step() was called
    optimizer: str | None = None  # the class of the optimizer the unsharded one copies
    lr: float | None = None  # its learning rate (of its first param group)
    n_optimizers: int = 0  # optimizers this rank stepped so far
    max_diff: float = 0.0  # largest |parameter - unsharded optimizer's parameter|
    update: float = 0.0  # largest |update| of the unsharded optimizer in this step
    param: str | None = None  # the parameter where max_diff is, by its name in the model
    unchanged: int = 0  # parameters the unsharded optimizer moved that stayed where they were
    n_params: int = 0  # the model's parameters
    state_bytes: int = 0  # bytes of tensors in the state of every optimizer this rank stepped
    full_bytes: int = 0  # the unsharded optimizer's state bytes
    largest_bytes: int = 0  # the state bytes of the model's largest parameter (full / elements)
    digest: str = ""  # a hash of the model's parameters (replicas compare it)
    error: str | None = None  # the unsharded optimizer could not be built or stepped


# --- find-the-hang (issue 25): the timeout asked for, Join, DDP's gradient all-reduces, drop_last


@dataclasses.dataclass(frozen=True, kw_only=True)
class PgTimeout(Event):
    """The `timeout` the program itself gave `init_process_group` (before the grader's cap)."""

    KIND = "pg_timeout"
    line: int | None = None
    seconds: float | None = None  # None: no timeout passed (torch's default: 30 min on gloo)
    given: str | None = None  # what was passed when it was no timedelta (its type name)


@dataclasses.dataclass(frozen=True, kw_only=True)
class JoinEnter(Event):
    """A `Join` context manager was entered: the classes of its joinables."""

    KIND = "join_enter"
    line: int | None = None
    joinables: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class JoinExit(Event):
    """A `Join` context manager was left (every rank had run out of inputs)."""

    KIND = "join_exit"
    line: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyncedForward(Event):
    """A forward through a DDP model set to all-reduce in its backward pass (grad enabled, not
    under no_sync()), recorded when a backward pass reaches its outputs, before DDP's all-reduce
    runs (a forward no backward follows is not recorded); at most MAX_SYNCED per rank."""

    KIND = "synced_forward"
    n: int = 0  # 1-based count of the rank's synced forwards
    line: int | None = None
    numel: int = 0  # elements of the DDP model's parameters that need a gradient
    in_join: bool = False  # inside a Join that lists this DDP model


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoaderDropLast(Event):
    """A DataLoader was built with drop_last=True (the program asked to drop a short batch)."""

    KIND = "loader_drop_last"
    line: int | None = None


# overlap-buckets (issue 24)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OverlapParams(Event):
    """The parameters whose gradients the overlap checks follow (the learner's optimizer's, in
    its order; else the loss's leaves), recorded once at the first backward pass."""

    KIND = "overlap_params"
    names: list[str] = dataclasses.field(default_factory=list)
    numels: list[int] = dataclasses.field(default_factory=list)
    itemsizes: list[int] = dataclasses.field(default_factory=list)
    source: str = ""  # "optimizer" or "graph"


@dataclasses.dataclass(frozen=True, kw_only=True)
class OverlapStep(Event):
    """One optimizer step as the overlap hook saw it, from its first backward pass to the step.

    `timeline` lists, in order: ["r", i] parameter i's gradient accumulated (ready), ["a", k]
    gradient all-reduce k issued, ["w", k, line] its handle waited on, ["e"] a backward pass
    returned, ["s"] the optimizer step began. `calls[k]` says what all-reduce k sent. `local` is
    each parameter's gradient sketch (sum and random projections) when it became ready, before
    any averaging (empty: no gradient on this rank this step); `used` the sketch the step read.
    `times` holds the wall time of each `timeline` entry (same length; empty from an older
    harness) and `backward` each backward pass's [began, returned] wall times, for the result's
    timeline (`grader.timeline`).
    """

    KIND = "overlap_step"
    n: int = 0
    line: int | None = None
    timeline: list[list[Any]] = dataclasses.field(default_factory=list)
    calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    local: list[list[float]] = dataclasses.field(default_factory=list)
    used: list[list[float]] = dataclasses.field(default_factory=list)
    times: list[float] = dataclasses.field(default_factory=list)
    backward: list[list[float]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OverlapLateWait(Event):
    """A handle of step `n`'s gradient all-reduce `k` waited on after that optimizer step."""

    KIND = "overlap_late_wait"
    n: int = 0
    k: int = 0
    line: int | None = None


# fsdp-reshard (issue 25)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FsdpState(Event):
    """The parameters of a model sharded with FSDP2 (`fully_shard`) and their optimizer state, as
    this rank holds them: before the process's first optimizer step ("first_step": what a resumed
    run trains from), at every distributed-checkpoint save ("save") and when the program ended
    ("end")."""

    KIND = "fsdp_state"
    when: str = ""
    line: int | None = None
    steps: int = 0  # optimizer steps this process took before
    names: list[str] = dataclasses.field(default_factory=list)  # parameter names in the model
    dtensor: list[bool] = dataclasses.field(default_factory=list)
    local: list[int] = dataclasses.field(default_factory=list)  # elements held by this rank
    full: list[int] = dataclasses.field(default_factory=list)  # elements of the whole parameter
    sums: list[float] = dataclasses.field(default_factory=list)  # of this rank's elements
    squares: list[float] = dataclasses.field(default_factory=list)
    # Per parameter: the sum of this rank's optimizer state tensors (None: no state yet).
    opt_sums: list[float | None] = dataclasses.field(default_factory=list)
    opt_step: float | None = None  # the largest "step" in the optimizer state
    optimizer: str | None = None  # its class name


@dataclasses.dataclass(frozen=True, kw_only=True)
class DcpReplay(Event):
    """Rank 0's last distributed-checkpoint save, read back in one process at the end of the
    program (`dcp_to_torch_save`): which files hold its tensors' chunks, and a digest of every
    value."""

    KIND = "dcp_replay"
    path: str | None = None
    line: int | None = None
    files: dict[str, int] = dataclasses.field(default_factory=dict)  # data file -> chunks
    tensors: dict[str, list[float]] = dataclasses.field(default_factory=dict)  # [n, sum, sq]
    counters: dict[str, int] = dataclasses.field(default_factory=dict)  # its integer values
    too_large: bool = False  # not read back (only `files`, from its metadata)
    error: str | None = None
