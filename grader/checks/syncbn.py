"""Checks of `syncbn-sharded-state/syncbn`: SyncBatchNorm, converted before the DDP wrap."""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, skipped
from grader.events import BnStats, DdpBatchnorm, SyncbnConvert
from grader.i18n import Message, msg

REL_TOL = 1e-5


def _plain_on_cpu(run: RunView) -> str:
    """On CPU workers: a program that converts only when CUDA is available fails here, why."""
    if run.device == "cuda":
        return ""
    return msg(
        "syncbn.convert_always",
        " Convert on every device, not only when CUDA is available: call "
        "nn.SyncBatchNorm.convert_sync_batchnorm(model) before DDP(...) unconditionally. This "
        "CPU worker runs SyncBatchNorm layers as per-rank BatchNorm, so a converted model runs "
        "here and its conversion is checked.",
    )


def _wraps(run: RunView) -> list[tuple[int, DdpBatchnorm]]:
    """Every DDP wrap of every rank, in the order each rank made them."""
    return run.typed(DdpBatchnorm)


def _converted_after(run: RunView, rank: int, wrap: DdpBatchnorm) -> list[SyncbnConvert]:
    """Conversions on `rank`, after `wrap`, of a model that was already wrapped in DDP."""
    return [
        c
        for r, c in run.typed(SyncbnConvert)
        if r == rank and c.seq > wrap.seq and (c.inside_ddp or c.is_ddp)
    ]


def _which(wraps: list[tuple[int, DdpBatchnorm]], e: DdpBatchnorm, *, start: bool) -> Message:
    """'The model' for a program with one DDP wrap, 'The 2nd model' when there are several
    (`start`: at the start of a sentence; else 'the model')."""
    on_rank = [w for r, w in wraps if r == wraps[0][0]]
    if len(on_rank) < 2:
        if start:
            return msg("syncbn.the_model_start", "The model")
        return msg("syncbn.the_model", "the model")
    n = next((i for i, w in enumerate(on_rank) if w.line == e.line), 0) + 1
    if start:
        return msg("syncbn.nth_model_start", "The {n:ordinal} model", n=n)
    return msg("syncbn.nth_model", "the {n:ordinal} model", n=n)


def _plain_layers(n: int) -> Message:
    if n == 1:
        return msg("syncbn.plain_layer", "1 plain BatchNorm layer")
    return msg("syncbn.plain_layers", "{n} plain BatchNorm layers", n=n)


def _synced_layers(n: int) -> Message:
    if n == 1:
        return msg("syncbn.synced_layer", "1 SyncBatchNorm layer")
    return msg("syncbn.synced_layers", "{n} SyncBatchNorm layers", n=n)


@check(
    "syncbn.converted",
    title="Every BatchNorm layer is a SyncBatchNorm",
    hint="model = nn.SyncBatchNorm.convert_sync_batchnorm(model) replaces every BatchNorm*d layer "
    "of the model, however deeply nested.",
)
def converted(run: RunView, params: dict[str, Any]) -> Outcome:
    wraps = _wraps(run)
    converts = run.typed(SyncbnConvert)
    if not wraps:
        if converts:
            rank, c = converts[0]
            return failed(
                msg(
                    "syncbn.never_wrapped",
                    "The model was converted {where} but never wrapped in DDP, so its "
                    "SyncBatchNorm layers never ran across ranks.",
                    where=run.where(c.line),
                ),
                rank=rank,
                line=c.line,
                hint_of="ddp.wrapped",
            )
        return failed(
            msg("syncbn.no_ddp", "No model was wrapped in DDP, so no SyncBatchNorm layer ran."),
            hint_of="ddp.wrapped",
        )
    late = False
    for rank, e in wraps:  # every wrap: a second DDP model with plain BatchNorm counts too
        if not e.n_plain:
            continue
        if _converted_after(run, rank, e):
            late = True
            continue
        return failed(
            msg(
                "syncbn.plain_left",
                "{which} wrapped in DDP {where} still has {layers}: {names}. Each rank "
                "normalises with the statistics of its own small batch only.{advice}",
                which=_which(wraps, e, start=True),
                where=run.where(e.line),
                layers=_plain_layers(e.n_plain),
                names=", ".join(e.plain[:6]),
                # Nothing converted at all on a CPU worker: perhaps only when CUDA is available.
                advice="" if converts else _plain_on_cpu(run),
            ),
            rank=rank,
            line=e.line,
        )
    if late:
        return passed(
            msg(
                "syncbn.converted_late",
                "All BatchNorm layers were converted, but only after the DDP wrap (see the next "
                "check).",
            )
        )
    rank, e = wraps[0]
    synced = sum(w.n_synced for r, w in wraps if r == rank)
    if not synced:
        return failed(
            msg(
                "syncbn.no_batchnorm",
                "The model wrapped in DDP {where} has no BatchNorm layer at all: keep the "
                "model's BatchNorm layers and convert them.",
                where=run.where(e.line),
            ),
            rank=rank,
            line=e.line,
        )
    n_wraps = sum(1 for r, _ in wraps if r == rank)
    if n_wraps == 1:
        return passed(
            msg(
                "syncbn.converted_one",
                "The model wrapped in DDP has {layers} and no plain BatchNorm left.",
                layers=_synced_layers(synced),
            )
        )
    return passed(
        msg(
            "syncbn.converted_many",
            "The {n} models wrapped in DDP have {layers} and no plain BatchNorm left.",
            n=n_wraps,
            layers=_synced_layers(synced),
        )
    )


@check(
    "syncbn.before_wrap",
    title="The conversion happens before the DDP wrap",
    hint="Convert first, then wrap: model = nn.SyncBatchNorm.convert_sync_batchnorm(model); "
    "ddp_model = DDP(model, ...). DDP inspects and registers the layers it wraps when it is "
    "built.",
)
def before_wrap(run: RunView, params: dict[str, Any]) -> Outcome:
    wraps = _wraps(run)
    if not wraps:
        return failed(msg("syncbn.no_wrap", "No model was wrapped in DDP."), hint_of="ddp.wrapped")
    for rank, e in wraps:
        later = _converted_after(run, rank, e) if e.n_plain else []
        if later:
            c = later[0]
            return failed(
                msg(
                    "syncbn.after_wrap",
                    "convert_sync_batchnorm ran {where}, after the model had been wrapped in DDP "
                    "{wrapped}: the wrapper was built around plain BatchNorm layers.",
                    where=run.where(c.line),
                    wrapped=run.where(e.line),
                ),
                rank=rank,
                line=c.line,
            )
    for rank, e in wraps:
        if e.n_plain:
            return failed(
                msg(
                    "syncbn.mixed_at_wrap",
                    "When {which} was wrapped in DDP {where} it had {synced} and {plain}.",
                    which=_which(wraps, e, start=False),
                    where=run.where(e.line),
                    synced=_synced_layers(e.n_synced),
                    plain=_plain_layers(e.n_plain),
                ),
                rank=rank,
                line=e.line,
            )
    rank, e = wraps[0]
    if not any(w.n_synced for r, w in wraps if r == rank):
        return failed(
            msg(
                "syncbn.none_at_wrap",
                "When the model was wrapped in DDP {where} it had no SyncBatchNorm layer.",
                where=run.where(e.line),
            ),
            rank=rank,
            line=e.line,
        )
    return passed(
        msg(
            "syncbn.before_wrap_ok",
            "The model already had its SyncBatchNorm layers when DDP wrapped it {where}.",
            where=run.where(e.line),
        )
    )


@check(
    "syncbn.stats_synced",
    title="Running statistics are the same on every rank (GPU workers)",
    hint="With SyncBatchNorm the batch statistics are computed over the global batch, so every "
    "rank's running_mean and running_var stay identical. A plain BatchNorm layer keeps "
    "per-rank statistics.",
)
def stats_synced(run: RunView, params: dict[str, Any]) -> Outcome:
    if run.device != "cuda":
        return skipped(
            msg(
                "syncbn.stats_on_cpu",
                "SyncBatchNorm synchronises statistics only on GPUs (torch refuses it on CPU), "
                "and this run was on CPU workers: the grader ran each SyncBatchNorm as a "
                "per-rank BatchNorm and checked the conversion only. GPU workers check the "
                "statistics.",
            )
        )
    by_rank: dict[int, dict[str, list[BnStats]]] = {}
    for rank, e in run.typed(BnStats):
        by_rank.setdefault(rank, {}).setdefault(str(e.layer), []).append(e)
    if not by_rank.get(0):
        return failed(
            msg(
                "syncbn.no_stats",
                "No SyncBatchNorm layer ran a training forward pass on rank 0.",
            ),
            rank=0,
        )
    compared = 0
    for rank, layers in sorted(by_rank.items()):
        if rank == 0:
            continue
        for layer, events in layers.items():
            for i, (a, b) in enumerate(zip(by_rank[0].get(layer, []), events, strict=False)):
                compared += 1
                stats = (
                    ("mean", a.mean, b.mean, a.mean_sum, b.mean_sum),
                    ("var", a.var, b.var, a.var_sum, b.var_sum),
                )
                for key, digest_a, digest_b, sum_a, sum_b in stats:
                    if digest_a == digest_b:
                        continue
                    x, y = float(sum_a), float(sum_b)
                    if abs(x - y) <= REL_TOL * max(abs(x), abs(y), 1e-12):
                        continue
                    return failed(
                        msg(
                            "syncbn.stats_differ",
                            "After training forward pass {n}, layer {layer}'s running_{key} "
                            "differs between rank 0 (sum {x:.6g}) and rank {rank} (sum {y:.6g}).",
                            n=i + 1,
                            layer=layer,
                            key=key,
                            x=x,
                            y=y,
                            rank=rank,
                        ),
                        rank=rank,
                    )
    if compared == 0:
        return failed(
            msg(
                "syncbn.one_rank",
                "Only one rank ran SyncBatchNorm layers: there was nothing to compare.",
            )
        )
    return passed(
        msg(
            "syncbn.stats_ok",
            "The running statistics were identical on every rank after each of {compared} "
            "layer forward passes compared.",
            compared=compared,
        )
    )
